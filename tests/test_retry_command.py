"""``xcore retry``: a sweep's failed trials run again as new attempts of the same units, in
one submission, and only those; active units and units whose secrets are gone are refused."""

from __future__ import annotations

import sys

import pytest

import xcore as xm
from xcore.cli.main import main
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.model.status import Status
from xcore.testing import fake, plugin_host

# Fails trials 0, 4, 8, 12 and 16 while the flag file does not exist.
TRIAL = ("import os, sys; i = int(sys.argv[2].split('=')[1]); "
         "sys.exit(1 if i % 4 == 0 and not os.path.exists(sys.argv[1]) else 0)")


def _sweep(tmp_path, trials: int = 20) -> int:
    plugin_host({"fake": fake})
    flag = tmp_path / "fixed"
    with xm.create_experiment("sweep") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", TRIAL, str(flag)])])
        for i in range(trials):
            experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"i": i}))
    experiment.wait_until_complete()
    return experiment.experiment_id


def _statuses(experiment_id: int) -> dict[int, Status]:
    xm.get_experiment(experiment_id).get_status()  # asks the backend
    return {u.id: u.status for u in open_store().work_units(experiment_id)}


def test_retry_failed_resubmits_exactly_the_failed_trials_in_one_submission(tmp_path, capsys):
    experiment_id = _sweep(tmp_path)
    failed = [u for u, s in _statuses(experiment_id).items() if s is Status.FAILED]
    assert failed == [1, 5, 9, 13, 17]
    (tmp_path / "fixed").write_text("")
    capsys.readouterr()
    assert main(["retry", str(experiment_id), "--dry-run"]) == 0
    assert "would resubmit 5 jobs of 5 work units: 1, 5, 9, 13, 17" in capsys.readouterr().out
    from xcore.cli.tables import id_ranges

    assert id_ranges([7, 1, 2, 3, 5, 6, 9, 3]) == "1-3, 5-7, 9" and id_ranges([]) == ""
    fake.LAUNCH_BATCHES.clear()
    assert main(["retry", str(experiment_id), "--failed"]) == 0
    assert "resubmitted 5 jobs" in capsys.readouterr().out
    assert fake.LAUNCH_BATCHES == [5]  # one submission
    assert set(_statuses(experiment_id).values()) == {Status.COMPLETED}
    attempts = open_store().job_attempts(experiment_id)
    retried = sorted(job.work_unit_id for unit in open_store().work_units(experiment_id) for job in unit.jobs
                     if job.id in attempts and attempts[job.id].current == 2)
    assert retried == failed  # same units, ids kept, attempt 2
    assert main(["retry", str(experiment_id)]) == 0 and "nothing to retry" in capsys.readouterr().out


def test_the_launch_api_retries_one_unit_and_refuses_an_active_one(tmp_path):
    experiment_id = _sweep(tmp_path, trials=2)
    plugin_host({"fake": fake})
    (tmp_path / "fixed").write_text("")
    experiment = xm.get_experiment(experiment_id)
    plan = experiment.retry([1])
    assert plan.units == [1] and plan.done is not None and len(plan.done.submitted) == 1
    assert _statuses(experiment_id) == {1: Status.COMPLETED, 2: Status.COMPLETED}

    with xm.create_experiment("held") as held:
        [exe] = held.package([xm.binary(fake.FakeSpec(), "true")])
        held.add(xm.JobGroup(a=xm.Job(exe, fake.FakeExecutor(hold=True)), b=xm.Job(exe, fake.FakeExecutor(hold=True))))
    [a, b] = [j for u in open_store().work_units(held.experiment_id) for j in u.jobs]
    fake.set_state(get_host().serializer.load(a.handle), Status.FAILED, "exit code 1", 1, failure="error")
    xm.get_experiment(held.experiment_id).get_status()
    plan = xm.get_experiment(held.experiment_id).retry()
    assert plan.jobs == [] and "still active" in plan.refused[1]


def test_a_unit_whose_secrets_are_gone_is_refused_naming_them(tmp_path, capsys):
    plugin_host({"fake": fake})
    with xm.create_experiment("secret") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "false")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(), env_vars={"WANDB_API_KEY": "k", "DB_PASSWORD": "p"}))
    experiment.wait_until_complete()
    [job] = open_store().work_units(experiment.experiment_id)[0].jobs
    fake.forget(get_host().serializer.load(job.handle))  # the backend no longer keeps its environment
    capsys.readouterr()
    assert main(["retry", str(experiment.experiment_id)]) == 1
    out = capsys.readouterr().out
    assert "DB_PASSWORD, WANDB_API_KEY" in out and "<redacted>" not in out
    assert _statuses(experiment.experiment_id) == {1: Status.FAILED}


def test_bad_targets_say_what_to_fix(tmp_path, capsys):
    experiment_id = _sweep(tmp_path, trials=1)
    with pytest.raises(SystemExit):
        main(["retry"])
    assert main(["retry", f"{experiment_id}/7"]) == 1
    assert "has no work unit 7" in capsys.readouterr().err


def test_a_unit_whose_arguments_held_a_url_password_is_refused(capsys):
    plugin_host({"fake": fake})
    with xm.create_experiment("url") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "false")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(), args=["--db=postgresql://me:pw@db/x"]))
    experiment.wait_until_complete()
    capsys.readouterr()
    assert main(["retry", str(experiment.experiment_id)]) == 1
    out = capsys.readouterr().out
    assert "password in its arguments" in out and "pw@" not in out
