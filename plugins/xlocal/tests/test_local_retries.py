"""xlocal's runner applies the job's retry policy itself: a failed attempt it should retry is
started again (same log, same checkpoint directory, the next ``XCORE_ATTEMPT``), and the store
records every attempt; a program's error under the default policy is not retried."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

import xcore as xm
import xlocal
from xcore.launch.registry import open_store
from xcore.model.status import Status

pytestmark = pytest.mark.usefixtures("xcore_home")

# Counts its runs in the checkpoint directory (which must survive attempts) and fails the
# first two with exit code 3.
FLAKY = """
import os, sys
path = os.path.join(os.environ["XCORE_CHECKPOINT_DIR"], "runs")
runs = int(open(path).read()) + 1 if os.path.exists(path) else 1
open(path, "w").write(str(runs))
print("attempt", os.environ["XCORE_ATTEMPT"], "run", runs, flush=True)
sys.exit(3 if runs < 3 else 0)
"""


def _run(policy: xm.Retry | None, code: str = FLAKY) -> tuple[int, object]:
    with xm.create_experiment("flaky") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", code])])
        experiment.add(xm.Job(exe, xlocal.Local(), retry=policy))
    experiment.wait_until_complete()
    [unit] = open_store().work_units(experiment.experiment_id)
    return experiment.experiment_id, unit


def test_a_job_that_fails_twice_with_a_retryable_code_completes_in_attempt_3(xcore_home):
    experiment_id, unit = _run(xm.Retry(max_attempts=3, exit_codes=(3,)))
    [job] = unit.jobs
    assert (unit.status, job.exit_code) == (Status.COMPLETED, 0)
    attempts = open_store().job_attempts(experiment_id)[job.id]
    assert attempts.current == 3 and [(a.number, a.status, a.failure, a.exit_code) for a in attempts.earlier] == [
        (1, Status.FAILED, "error", 3), (2, Status.FAILED, "error", 3)]
    log = Path(job.log_path).read_text()
    assert "attempt 1 run 1" in log and "attempt 2 run 2" in log and "attempt 3 run 3" in log
    assert "xcore: attempt 1 failed (error, return code 3); attempt 2 starts" in log
    checkpoints = xcore_home / "plugins" / "xlocal" / "checkpoints" / str(experiment_id) / "1"
    assert (checkpoints / "runs").read_text() == "3"  # one directory for every attempt
    assert stat.S_IMODE(os.stat(checkpoints).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(checkpoints.parent).st_mode) == 0o700


def test_a_program_error_is_not_retried_by_the_default_policy():
    experiment_id, unit = _run(None)
    [job] = unit.jobs
    assert (unit.status, job.exit_code) == (Status.FAILED, 3)
    assert open_store().job_attempts(experiment_id)[job.id].current == 1
    assert Path(job.log_path).read_text() == "attempt 1 run 1\n"


def test_the_policy_s_attempts_are_a_limit():
    experiment_id, unit = _run(xm.Retry(max_attempts=2, on=("error",)))
    [job] = unit.jobs
    assert (unit.status, job.exit_code) == (Status.FAILED, 3)
    attempts = open_store().job_attempts(experiment_id)[job.id]
    assert attempts.current == 2 and [a.number for a in attempts.earlier] == [1]


def test_a_job_killed_by_sigkill_reads_out_of_memory():
    _, unit = _run(None, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    [job] = unit.jobs
    attempts = open_store().job_attempts(unit.experiment_id)[job.id]
    assert unit.status is Status.FAILED and attempts.failure == "out_of_memory"


def test_xcore_retry_runs_a_failed_local_job_as_attempt_2_with_its_secret(tmp_path):
    flag = tmp_path / "fixed"
    code = ("import os, sys; print('attempt', os.environ['XCORE_ATTEMPT'], os.environ['API_TOKEN'], flush=True); "
            f"sys.exit(0 if os.path.exists({str(flag)!r}) else 1)")
    with xm.create_experiment("retry me") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", code])])
        experiment.add(xm.Job(exe, xlocal.Local(), env_vars={"API_TOKEN": "s3cret"}))
    experiment.wait_until_complete()
    [job] = open_store().work_units(experiment.experiment_id)[0].jobs
    assert job.status is Status.FAILED and job.env["API_TOKEN"] == "<redacted>"
    flag.write_text("")
    plan = xm.get_experiment(experiment.experiment_id).retry()
    assert plan.done is not None and plan.done.submitted == [job.id]
    xm.get_experiment(experiment.experiment_id).wait_until_complete()
    [unit] = open_store().work_units(experiment.experiment_id)
    assert unit.status is Status.COMPLETED and unit.jobs[0].attempt == 2
    assert Path(unit.jobs[0].log_path).read_text() == "attempt 1 s3cret\nattempt 2 s3cret\n"


def test_the_backoff_delays_the_next_attempt():
    from xlocal.processes import read_events

    code = ("import os, sys; p = os.path.join(os.environ['XCORE_CHECKPOINT_DIR'], 'n'); "
            "n = os.path.exists(p); open(p, 'w').write('1'); sys.exit(0 if n else 5)")
    experiment_id, unit = _run(xm.Retry(max_attempts=2, exit_codes=(5,), backoff_secs=1.5), code)
    [job] = unit.jobs
    assert unit.status is Status.COMPLETED
    [events] = read_events(job.handle["run_dir"]).values()
    [retry] = events["retries"]
    assert events["start"]["t"] - retry["t"] >= 1.5  # the second attempt waited for its backoff
    assert open_store().job_attempts(experiment_id)[job.id].current == 2


def test_between_attempts_the_job_reads_pending_with_its_history():
    import time

    from xlocal import processes
    from xlocal.handles import ProcessHandle

    class Run:  # a live runner, no cancel
        def cancel_requested(self, index: int) -> bool:
            return False

        def runner_alive(self) -> bool:
            return True

    now = time.time()
    job = {"start": {"pid": 1, "t": now - 10}, "retries": [
        {"rc": 5, "t": now - 5, "started": now - 10, "failure": "error", "attempt": 1, "next": 2, "at": now + 30}]}
    state = processes._state(ProcessHandle("/nowhere", 0), job, Run())  # type: ignore[arg-type]
    assert state.status is Status.PENDING and state.attempt == 2
    assert state.message.startswith("retrying: attempt 1 failed (error, exit code 5); attempt 2 starts in ")
    [earlier] = state.previous_attempts
    assert (earlier.number, earlier.status, earlier.failure, earlier.exit_code) == (1, Status.FAILED, "error", 5)
