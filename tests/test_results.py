"""Trial results (``XCORE_RESULT`` lines read from logs), ``xcore show`` columns, sort and top,
and tracker env/links, through the fake backend and each real store (SQLite, PostgreSQL)."""

from __future__ import annotations

import json
import sys
import types

import pytest

import xcore as xm
from xcore.cli.main import main
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.runtime import results
from xcore.testing import fake, plugin_host
from xcore.trackers import TrackedJob
from xcore.trackers.builtin import tracking


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest, xcore_home, monkeypatch) -> str:
    """Run the test on the personal SQLite store, then on a fresh PostgreSQL store."""
    if request.param == "postgresql":
        monkeypatch.setenv("XCORE_STORE", request.getfixturevalue("pg_url"))
    return request.param


def test_parse_lines_last_value_wins_and_bad_lines_are_ignored():
    chunks = ['noise\nXCORE_RESULT {"loss": 1.5, "acc', 'uracy": 0.5}\n', "XCORE_RESULT not json\n",
              'XCORE_RESULT {"loss": 0.25, "nan": NaN, "name": "x", "ok": true}', "\nXCORE_RESULT [1]\n"]
    assert results.parse_chunks(chunks) == {"loss": 0.25, "accuracy": 0.5, "nan": None, "name": None, "ok": 1.0}
    assert results.parse_line("say XCORE_RESULT {\"a\": 1}") is None  # the marker starts the line


TRIAL = ("import json, sys; i = int(sys.argv[1].split('=')[1]); "
         "print('XCORE_RESULT', json.dumps({'loss': 1 / i, 'accuracy': i / 10}))")


def _sweep(n: int) -> int:
    with xm.create_experiment("results") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", TRIAL])])
        for i in range(1, n + 1):
            experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"i": i}))
    experiment.wait_until_complete()
    return experiment.experiment_id


def test_show_adds_results_columns_sorts_and_keeps_the_top(any_store, capsys):
    plugin_host({"fake": fake})
    experiment_id = _sweep(4)
    assert main(["show", str(experiment_id), "--json", "--sort", "-loss", "--top", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [u["id"] for u in data["work_units"]] == [1, 2]
    assert data["work_units"][0]["results"] == {"loss": 1.0, "accuracy": 0.1}
    assert data["work_units"][0]["links"] == {"fake": f"https://tracker.invalid/xcore-{experiment_id}/1"}
    assert main(["show", str(experiment_id), "--sort", "loss", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "LOSS" in out and "ACCURACY" in out and "0.25" in out and "https://tracker.invalid" in out
    store = open_store()
    assert store.results_pending(experiment_id) == []  # read once, then never again
    assert store.results(experiment_id)[3] == {"loss": 1 / 3, "accuracy": 0.3}
    assert main(["show", str(experiment_id), "--sort", "nosuch"]) == 1
    assert "Cannot sort by 'nosuch'" in capsys.readouterr().err


def test_results_are_kept_per_job_and_overwritten_by_name(any_store):
    plugin_host({"fake": fake})
    experiment_id = _sweep(1)
    store = open_store()
    assert type(store).__name__ == {"sqlite": "SqliteStore", "postgresql": "PostgresStore"}[any_store]
    assert results.collect(store, get_host(), experiment_id) == 1
    job_id = store.work_units(experiment_id)[0].jobs[0].id
    store.record_results(job_id, {"loss": 9.0, "extra": 1.0})
    assert store.results(experiment_id) == {1: {"loss": 9.0, "accuracy": 0.1, "extra": 1.0}}


def _job(env: dict[str, str]) -> TrackedJob:
    return TrackedJob(7, "sweep <x>", ("a", "b,c"), 3, "job", {"lr": 0.1}, {}, env)


def test_trackers_are_off_unless_configured():
    assert tracking(_job({})) is None


def test_wandb_neptune_tensorboard_env_and_links():
    answer = tracking(_job({"WANDB_PROJECT": "proj", "WANDB_ENTITY": "me", "WANDB_API_KEY": "k",
                            "NEPTUNE_PROJECT": "ws/proj", "XCORE_TENSORBOARD_DIR": "/shared/tb"}))
    assert answer is not None
    env, links = answer.env, answer.links
    assert env["WANDB_RUN_GROUP"] == "xcore-7" and env["WANDB_NAME"] == "xcore-7/3"
    assert env["WANDB_TAGS"] == "a,b c" and env["WANDB_API_KEY"] == "k"
    assert links["wandb"] == f"https://wandb.ai/me/proj/runs/{env['WANDB_RUN_ID']}"
    assert links["neptune"].startswith("https://app.neptune.ai/ws/proj/runs/table?query=")
    assert env["NEPTUNE_CUSTOM_RUN_ID"] in links["neptune"] and env["NEPTUNE_PROJECT"] == "ws/proj"
    assert env["TENSORBOARD_LOGDIR"] == links["tensorboard"] == "/shared/tb/xcore-7/3"
    assert json.loads(env["XCORE_RUN_TAGS"]) == ["a", "b,c"]


def test_tracker_env_reaches_the_job_but_never_overrides_the_users(any_store, monkeypatch):
    plugin_host({"fake": fake})
    monkeypatch.setenv("WANDB_PROJECT", "proj")
    monkeypatch.setenv("WANDB_ENTITY", "me")
    with xm.create_experiment("tracked") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable)])
        code = "import os; print(os.environ['WANDB_RUN_GROUP'], os.environ['WANDB_PROJECT'])"
        experiment.add(xm.Job(exe, fake.FakeExecutor(), args=["-c", code], env_vars={"WANDB_PROJECT": "mine"}))
    experiment.wait_until_complete()
    store = open_store()
    [unit] = store.work_units(experiment.experiment_id)
    assert unit.jobs[0].env["WANDB_PROJECT"] == "mine"
    assert unit.jobs[0].env["WANDB_RUN_GROUP"] == f"xcore-{experiment.experiment_id}"
    assert "wandb" in store.links(experiment.experiment_id)[1]
    assert "fake" in store.links(experiment.experiment_id)[1]


def _fake_without_tracker() -> types.ModuleType:
    """The fake backend minus its ``xcore_job_tracking`` hook: a backend plugin that tracks nothing."""
    plugin = types.ModuleType("fake_untracked")
    vars(plugin).update({k: v for k, v in vars(fake).items() if k not in ("xcore_job_tracking", "__name__")})
    return plugin


@pytest.mark.parametrize("switched_on", [False, True])
def test_the_tracker_hook_is_only_called_when_some_tracker_can_answer(xcore_home, monkeypatch, switched_on):
    """A sweep without trackers (no plugin but the built-in one implements the hook, none of
    its trackers is switched on) makes no hook call per job, and its jobs get nothing; one
    built-in tracker switched on gets every job its env and link, as before."""
    plugin_host({"fake": _fake_without_tracker()})
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    monkeypatch.delenv("NEPTUNE_PROJECT", raising=False)
    monkeypatch.delenv("XCORE_TENSORBOARD_DIR", raising=False)
    if switched_on:
        monkeypatch.setenv("XCORE_TENSORBOARD_DIR", "/shared/tb")
    calls: list[int] = []
    undo = get_host().pm.add_hookcall_monitoring(
        lambda name, impls, kwargs: calls.append(kwargs["job"].work_unit_id) if name == "xcore_job_tracking" else None,
        lambda outcome, name, impls, kwargs: None)
    with xm.create_experiment("untracked") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for seed in range(3):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True), args={"seed": seed}))
    undo()
    store = open_store()
    units = store.work_units(experiment.experiment_id)
    links = store.links(experiment.experiment_id)
    if switched_on:
        assert calls == [1, 2, 3]
        assert [u.jobs[0].env["TENSORBOARD_LOGDIR"] for u in units] == [
            f"/shared/tb/xcore-{experiment.experiment_id}/{i}" for i in (1, 2, 3)]
        assert sorted(links) == [1, 2, 3]
    else:
        assert calls == []
        assert [u.jobs[0].env for u in units] == [{}, {}, {}] and not links


@pytest.mark.parametrize("value", ["<script>", "a\nb"])
def test_result_names_are_data(value):
    assert results.parse_line("XCORE_RESULT " + json.dumps({value: 1})) == {value: 1.0}


def test_a_log_that_cannot_be_read_now_is_read_later(any_store, monkeypatch):
    plugin_host({"fake": fake})
    experiment_id = _sweep(2)
    store, host = open_store(), get_host()

    def unreachable(*args, **kwargs):
        raise OSError("backend unreachable")

    monkeypatch.setattr(host, "job_logs", unreachable)
    monkeypatch.setattr(host, "job_log_lines", unreachable)
    assert results.collect(store, host, experiment_id) == 0
    assert len(store.results_pending(experiment_id)) == 2 and store.results(experiment_id) == {}
    monkeypatch.undo()
    assert results.collect(store, host, experiment_id) == 2
    assert store.results_pending(experiment_id) == [] and set(store.results(experiment_id)) == {1, 2}


def test_the_results_of_many_jobs_are_read_in_one_batched_call(any_store, monkeypatch):
    """A backend that batches log reads (``xcore_job_log_lines``) is asked once for every
    unread job of its kind, never job by job (over SSH: one command, not thousands)."""
    plugin_host({"fake": fake})
    experiment_id = _sweep(5)
    store, host = open_store(), get_host()
    batched: list[int] = []
    real = host.job_log_lines

    def counting(kind, handles, marker):
        batched.append(len(handles))
        return real(kind, handles, marker)

    def one_by_one(*args, **kwargs):
        raise AssertionError("a log was read on its own")

    monkeypatch.setattr(host, "job_log_lines", counting)
    monkeypatch.setattr(host, "job_logs", one_by_one)
    assert results.collect(store, host, experiment_id) == 5
    assert batched == [5]
    assert store.results_pending(experiment_id) == [] and len(store.results(experiment_id)) == 5


def test_a_version_2_store_migrates_and_keeps_its_records(tmp_path):
    import sqlite3

    from xcore.store.sqlite import MIGRATIONS, SqliteStore

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    for migration in MIGRATIONS[:2]:
        db.executescript(migration)
    db.execute("INSERT INTO experiments (title, created_at) VALUES ('old', 1.0)")
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    store = SqliteStore(path)
    assert store.get_experiment(1).title == "old"
    from xcore.store.records import NewJob

    [job_id] = store.add_work_unit(1, 1, "work_unit", {"lr": 0.1}, "", [NewJob("job", "k", {}, {}, [], {})])
    store.record_results(job_id, {"loss": 0.5}, final=True)
    store.record_links([(job_id, "wandb", "https://wandb.ai/x")])
    assert store.results(1) == {1: {"loss": 0.5}} and store.links(1) == {1: {"wandb": "https://wandb.ai/x"}}
