"""GPU-hours and cost: requested resources times run time, priced by ``config.toml``'s [cost]."""

from __future__ import annotations

import json
import os

import pytest

from xcore.cli.main import main
from xcore.errors import ConfigurationError
from xcore.model.usage import Meter, parse_prices, requested


def _requirements(resources: dict, **extras) -> dict:
    return {"kind": "fake.FakeExecutor", "requirements": {"resources": resources, "extras": extras}}


def _store_jobs(jobs: list[tuple[dict, float | None, float | None]]) -> int:
    """One work unit per (executor, started_at, ended_at), written straight into the store."""
    from xcore import paths
    from xcore.model.status import JobState, Status
    from xcore.store.records import NewJob
    from xcore.store.sqlite import open_url

    store = open_url(paths.store_url())
    experiment = store.create_experiment("usage", user="ann", host="box")
    states = []
    for unit, (executor, started, ended) in enumerate(jobs, start=1):
        [job_id] = store.add_work_unit(experiment.id, unit, "work_unit", {"i": unit}, f"id{unit}",
                                       [NewJob("main", "fake.FakeExecutor", executor,
                                               {"kind": "fake.FakeExecutable", "command": ["true"]}, [], {})])
        status = Status.COMPLETED if ended is not None else Status.RUNNING
        states.append((job_id, JobState(status, exit_code=0 if ended else None, started_at=started, ended_at=ended)))
    store.record_states(states)
    store.close()
    return experiment.id


def _config(xcore_home, text: str) -> None:
    config = xcore_home.parent / "xcore-config"
    config.mkdir(exist_ok=True)
    (config / "config.toml").write_text(text)
    assert os.environ["XCORE_CONFIG_DIR"] == str(config)


def test_two_gpus_for_thirty_minutes_is_one_gpu_hour(xcore_home, capsys):
    experiment_id = _store_jobs([(_requirements({"A100": 2, "CPU": 4}), 1000.0, 1000.0 + 1800),
                                 (_requirements({}), 1000.0, 1000.0 + 3600)])
    assert main(["show", str(experiment_id), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["usage"] == {"cpu_hours": 3.0, "gpu_hours": 1.0, "tpu_hours": 0.0, "cost": None}
    assert [u["usage"]["gpu_hours"] for u in data["work_units"]] == [1.0, 0.0]
    assert [u["usage"]["cpu_hours"] for u in data["work_units"]] == [2.0, 1.0]  # no CPUs asked: one
    assert main(["show", str(experiment_id)]) == 0
    out = capsys.readouterr().out
    assert "  usage    1.00 GPU-h (A100), 3.00 CPU-h\n" in out
    assert "USAGE" in out and "1.00 GPU-h (A100), 2.00 CPU-h" in out
    assert main(["list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["usage"]["gpu_hours"] == 1.0


def test_every_attempt_of_a_retried_job_counts(xcore_home, capsys):
    """A 2-GPU job preempted after 30 minutes and run again for 30 more used 2 GPU-hours, in
    `show`, `list --json` and the dashboard's line alike (issue 28 item 4 with issue 23's attempts)."""
    from xcore import paths
    from xcore.model.status import Attempt, JobState, Status
    from xcore.store.sqlite import open_url
    from xcore.ui.app import _usage_line
    from xcore.workspace.views import read_units

    experiment_id = _store_jobs([(_requirements({"A100": 2, "CPU": 2}), 1000.0, None)])
    store = open_url(paths.store_url())
    [unit] = store.work_units(experiment_id)
    first = Attempt(number=1, status=Status.FAILED, failure="preempted", exit_code=None, started_at=1000.0,
                    ended_at=1000.0 + 1800)
    store.record_states([(unit.jobs[0].id, JobState(Status.COMPLETED, "exit code 0", 0, 5000.0, 5000.0 + 1800,
                                                    attempt=2, previous_attempts=(first,)))])
    assert main(["show", str(experiment_id), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["usage"]["gpu_hours"] == 2.0
    assert main(["list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["usage"]["gpu_hours"] == 2.0
    assert _usage_line(read_units(store, experiment_id)).startswith("2.00 GPU-h (A100), 2.00 CPU-h")
    store.close()


def test_a_price_table_turns_hours_into_cost(xcore_home, capsys):
    experiment_id = _store_jobs([(_requirements({"A100": 2, "CPU": 4}), 1000.0, 1000.0 + 1800)])
    _config(xcore_home, 'title = "mine"\n[cost]\ncurrency = "USD"\ncpu = 0.05\ngpu = 2.5\n')
    assert main(["show", str(experiment_id), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["usage"]["cost"] == pytest.approx(2 * 0.05 + 1.0 * 2.5)
    # a table for the job's backend (its plugin here: no cluster or target) and a price by type win
    _config(xcore_home, '[cost]\ncurrency = "USD"\ncpu = 0.05\ngpu = 2.5\n[cost.fake]\na100 = 4.0\n')
    assert main(["show", str(experiment_id)]) == 0
    assert "  usage    1.00 GPU-h (A100), 2.00 CPU-h, cost 4.10 USD\n" in capsys.readouterr().out
    assert main(["list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["usage"]["cost"] == pytest.approx(4.1)


@pytest.mark.parametrize(("text", "named"), [
    ("[cost]\ngpus = 2.5\n", "'gpus' (did you mean gpu?)"),
    ('[cost]\ngpu = "cheap"\n', "gpu = 'cheap' is not a price"),
    ("[cost]\n[cost.cluster-a]\nh100 = -1\n", "[cost.cluster-a]: h100 = -1"),
    ("[cost]\ncurrency = 1\n", "currency must be a string"),
    ("cost = 3\n", "cost must be a table"),
    ("[cost\n", "Cannot read"),
])
def test_a_bad_price_table_is_an_error_naming_the_key(xcore_home, capsys, text, named):
    experiment_id = _store_jobs([(_requirements({"CPU": 1}), 1000.0, 1060.0)])
    _config(xcore_home, text)
    assert main(["show", str(experiment_id)]) == 1
    err = capsys.readouterr().err
    assert named in err and "config.toml" in err
    assert main(["list", "--json"]) == 1
    assert named in capsys.readouterr().err


def test_a_running_job_counts_until_now():
    meter = Meter(now=1000.0 + 900)
    usage = meter.job({"executor": _requirements({"T4": 1}), "executor_kind": "fake.FakeExecutor",
                       "started_at": 1000.0, "ended_at": None})
    assert usage.gpu_hours == pytest.approx(0.25) and usage.cost is None
    assert meter.job({"executor": _requirements({"T4": 1}), "started_at": None, "ended_at": None}).gpu_hours == 0


def test_replicas_topologies_and_slices_count_every_chip():
    assert requested(_requirements({"V100": 2, "CPU": 8}, replicas=3)).gpus == 6
    assert requested(_requirements({"V100": 2, "CPU": 8}, replicas=3)).cpus == 24
    assert requested(_requirements({"A100": "8x2"})).gpus == 16  # two hosts of eight
    tpu = requested(_requirements({"TPU_V4": "4x4"}, num_slices=2))
    assert (tpu.tpus, tpu.gpus, tpu.accelerator) == (32, 0, "TPU_V4")
    assert requested({"kind": "x", "requirements": {"resources": {"NOPE": 1}}}).cpus == 1  # unreadable: one CPU
    assert requested(None).cpus == 1


def test_cluster_and_target_choose_the_table():
    prices = parse_prices({"cpu": 1.0, "cluster-a": {"cpu": 2.0}, "vertex-prod": {"cpu": 3.0}})
    assert prices is not None
    job = {"started_at": 0.0, "ended_at": 3600.0, "executor_kind": "xhpc.Slurm"}
    meter = Meter(0.0, prices)
    assert meter.job({**job, "executor": {"cluster": "cluster-a"}}).cost == 2.0
    assert meter.job({**job, "executor": {"target": "vertex-prod"}}).cost == 3.0
    assert meter.job({**job, "executor": {"cluster": "elsewhere"}}).cost == 1.0
    with pytest.raises(ConfigurationError, match=r"\[cost.cluster-a\]: unknown resource 'gpus'"):
        parse_prices({"cluster-a": {"gpus": 1}})


def test_the_dashboard_shows_hours_and_cost(xcore_home):
    from xcore.testing import require_module

    require_module("starlette", "the dashboard's extra: pip install 'xcore-core[ui]' (scripts/test.sh does)")
    from starlette.testclient import TestClient

    from xcore.hooks.host import get_host
    from xcore.launch.registry import open_store
    from xcore.ui.app import create_app

    experiment_id = _store_jobs([(_requirements({"H100": 2, "CPU": 4}), 1000.0, 1000.0 + 1800)])
    _config(xcore_home, '[cost]\ngpu = 3.0\n')
    http = TestClient(create_app(open_store(), get_host()), base_url="http://127.0.0.1")
    page = http.get(f"/experiments/{experiment_id}").text
    assert "usage: 1.00 GPU-h (H100), 2.00 CPU-h, cost 3.00" in page
    assert "usage: 1.00 GPU-h (H100), 2.00 CPU-h, cost 3.00" in http.get(f"/experiments/{experiment_id}/units/1").text
    _config(xcore_home, '[cost]\ngpu = "free"\n')
    assert "gpu = &#39;free&#39; is not a price" in http.get(f"/experiments/{experiment_id}").text
