"""Retries on the real schedulers (issue 23): a requeue or reschedule is the next attempt, the
program sees it in XCORE_ATTEMPT and keeps its XCORE_CHECKPOINT_DIR; a time limit is caught by
the warning signal and the task requeued; a preemptible partition's tasks finish after a
higher-priority job took their node. Each test waits on conditions with deadlines."""

from __future__ import annotations

import os
import stat
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import xcore as xm
from xcore.testing import require_service
from xhpc_helpers import HOW, REMOTE_STAGING, cluster_toml, service_up

pytestmark = pytest.mark.infra("slurm")


def _configure(xcore_env: Path, scheduler: str, mode: str) -> str:
    require_service(scheduler, lambda: service_up(scheduler), HOW)
    if scheduler == "slurm":
        _retry_cluster()
    if mode == "ssh":
        require_service("sshd", lambda: service_up("sshd"), HOW)
        staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    else:
        staging = str(xcore_env / "staging")
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", scheduler, mode, staging))
    return staging


def _retry_cluster() -> None:
    """The test Slurm's retry setup (scripts/infra/slurm.sh): the preemptible partitions, and
    requeued jobs held 20 s (not Slurm's 120 s, which would outlast these tests' deadlines)."""
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    partitions = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30).stdout
    assert "cred_expire=20" in config and "preempt/partition_prio" in config and "lowprio" in partitions, (
        "the test Slurm lacks its retry setup (partitions lowprio/highprio, cred_expire=20): "
        "run `bash scripts/infra/slurm.sh` as root")


def _handle(job: Any) -> Any:
    from xcore.hooks.host import get_host

    return get_host().serializer.load(job.handle)


def _state(job: Any) -> xm.JobState:
    from xcore.hooks.host import get_host

    return get_host().job_states(job.handle_kind, [_handle(job)])[0]


def _log(job: Any) -> str:
    from xcore.hooks.host import get_host

    return "".join(get_host().job_logs(job.handle_kind, _handle(job), False))


def _until(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def _running(job: Any) -> bool:
    return _state(job).status is xm.Status.RUNNING


def _up_for(job: Any, secs: float) -> bool:
    state = _state(job)
    return state.status is xm.Status.RUNNING and state.started_at is not None and time.time() - state.started_at >= secs


def _done(job: Any) -> xm.JobState | None:
    state = _state(job)
    return state if state.status.is_terminal else None


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


def _slurm_task(job: Any) -> str:
    handle = _handle(job)
    return f"{handle.job_id}_{handle.task}"


# Attempt 1 waits to be taken off the node; a later attempt records what it saw and finishes.
_WAIT_FOR_REQUEUE = (
    'echo "attempt=$XCORE_ATTEMPT checkpoint=$XCORE_CHECKPOINT_DIR"; '
    'stat -c "mode=%a" "$XCORE_CHECKPOINT_DIR"; '
    '[ "$XCORE_ATTEMPT" -gt 1 ] || { echo seen > "$XCORE_CHECKPOINT_DIR/first"; exec sleep 600; }; '
    'echo "first attempt left: $(cat "$XCORE_CHECKPOINT_DIR/first")"')


def test_slurm_requeued_task_is_attempt_2_and_keeps_its_checkpoint_dir(xcore_env: Path) -> None:
    """`scontrol requeue` of a running task (over SSH): it runs again as attempt 2, its
    program sees XCORE_ATTEMPT=2 and the file attempt 1 left in XCORE_CHECKPOINT_DIR (0700, on
    the cluster's staging area), and status reports the first run as a preempted attempt."""
    import xhpc

    staging = _configure(xcore_env, "slurm", "ssh")
    with xm.create_experiment(title="requeue") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command([_WAIT_FOR_REQUEUE]), xhpc.Slurm.Spec())])
        unit = experiment.add(xm.Job(exe, xhpc.Slurm())).result()
    [job] = experiment._all_jobs()
    _until("the task to run", lambda: _running(job) and "attempt=1" in _log(job), 60)
    _sh("scontrol", "requeue", _slurm_task(job))
    state = _until("attempt 2 to finish", lambda: _done(job), 120)
    assert state.status is xm.Status.COMPLETED, state
    assert state.attempt == 2, state
    [first] = state.previous_attempts
    assert (first.number, first.failure, first.status) == (1, "preempted", xm.Status.FAILED), first
    log = _log(job)
    checkpoint = f"{staging}/checkpoints/{experiment.experiment_id}/{unit.work_unit_id}"
    assert f"attempt=1 checkpoint={checkpoint}" in log and f"attempt=2 checkpoint={checkpoint}" in log, log
    assert "first attempt left: seen" in log and "mode=700" in log and "----- xhpc: attempt 2 -----" in log, log
    assert stat.S_IMODE(os.stat(checkpoint).st_mode) == 0o700
    # The store keeps the history: two attempts, the first preempted.
    from xcore.launch.registry import open_store

    [recorded] = experiment.wait_until_complete(timeout=60)
    assert recorded.status is xm.Status.COMPLETED
    attempts = open_store().job_attempts(experiment.experiment_id)[recorded.id]
    assert attempts.count == 2 and [(a.number, a.failure) for a in attempts.earlier] == [(1, "preempted")]


_RESUMABLE = r"""
import os, pathlib, signal, sys, time
attempt = os.environ["XCORE_ATTEMPT"]
saved = pathlib.Path(os.environ["XCORE_CHECKPOINT_DIR"], "step")
if saved.exists():
    print(f"attempt {attempt} resumed at step {saved.read_text()}", flush=True)
    sys.exit(0)
step = 0
def save(signum, frame):
    saved.write_text(str(step))
    print(f"attempt {attempt} saved step {step} on the warning", flush=True)
    sys.exit(75)  # not finished: the job script requeues it
signal.signal(signal.SIGUSR1, save)
print(f"attempt {attempt} starts from scratch", flush=True)
while True:
    step += 1
    time.sleep(0.5)
"""


def test_slurm_time_limit_warning_checkpoints_and_attempt_2_resumes(xcore_env: Path) -> None:
    """A job with Slurm's smallest limit (one minute) and a policy that retries timeouts gets
    SIGUSR1 40 s before the limit, saves its step and exits; the job script requeues it and
    attempt 2 resumes from the checkpoint and completes. Status calls the first run a timeout."""
    import xhpc

    _configure(xcore_env, "slurm", "local")
    executor = xhpc.Slurm(time_limit=60, signal_before_limit=40,
                          retry=xm.Retry(max_attempts=2, on=("preemption", "node_failure", "timeout")))
    with xm.create_experiment(title="time limit") as experiment:
        [exe] = experiment.package([xm.Packageable(xm.Binary("python3"), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, executor, args=["-c", _RESUMABLE]))
    [job] = experiment._all_jobs()
    state = _until("the job to finish", lambda: _done(job), 150)
    log = _log(job)
    assert state.status is xm.Status.COMPLETED, (state, log)
    assert "attempt 1 starts from scratch" in log and "attempt 1 saved step" in log, log
    saved = log.split("attempt 1 saved step ")[1].split()[0]
    assert f"attempt 2 resumed at step {saved}" in log, log
    assert state.attempt == 2, state
    [first] = state.previous_attempts
    assert first.failure == "timeout", first


def test_slurm_retries_a_program_failure_by_itself(xcore_env: Path) -> None:
    """A policy that retries exit code 75 (not preemption: the job is submitted --no-requeue):
    the job script requeues the task itself, with no xcore process watching, and attempt 2
    completes; the first attempt reads error, exit code 75. Another exit code is final."""
    import xhpc

    _configure(xcore_env, "slurm", "local")
    executor = xhpc.Slurm(retry=xm.Retry(max_attempts=2, on=(), exit_codes=(75,)))
    with xm.create_experiment(title="exit codes") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(
            ['echo "attempt=$XCORE_ATTEMPT"; [ "$XCORE_ATTEMPT" -gt 1 ] || exit "$1"']), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, executor, args=["75"]))
        experiment.add(xm.Job(exe, executor, args=["3"]))
    retried, final = experiment._all_jobs()
    state = _until("attempt 2 to finish", lambda: _done(retried), 120)
    assert (state.status, state.attempt) == (xm.Status.COMPLETED, 2), (state, _log(retried))
    [first] = state.previous_attempts
    assert (first.failure, first.exit_code) == ("error", 75), first
    state = _until("the other job", lambda: _done(final), 60)
    assert (state.status, state.failure, state.exit_code, state.attempt) == (xm.Status.FAILED, "error", 3, None)
    assert "attempt=2" not in _log(final)


def test_slurm_preempted_sweep_finishes_in_later_attempts(xcore_env: Path) -> None:
    """A 4-task sweep on the preemptible partition fills the node; a high-priority job that
    needs the whole node preempts (requeues) them. Every preempted task completes afterwards
    as attempt 2 with a preempted attempt in its history; the high-priority job completes."""
    import xhpc

    _configure(xcore_env, "slurm", "local")
    low = xhpc.Slurm(partition="lowprio", requirements=xm.JobRequirements(cpu=2))
    high = xhpc.Slurm(partition="highprio", requirements=xm.JobRequirements(cpu=8), time_limit="5m")
    with xm.create_experiment(title="preemption") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(
            ['echo "attempt=$XCORE_ATTEMPT"; [ "$XCORE_ATTEMPT" -gt 1 ] || exec sleep 600']), xhpc.Slurm.Spec())])
        for _ in range(4):
            experiment.add(xm.Job(exe, low))
    sweep = experiment._all_jobs()
    _until("the sweep to fill the node", lambda: all(_running(j) for j in sweep), 240)
    with xm.create_experiment(title="urgent") as urgent:
        [exe] = urgent.package([xm.Packageable(xhpc.Command(["sleep 1"]), xhpc.Slurm.Spec())])
        urgent.add(xm.Job(exe, high))
    [hot] = urgent._all_jobs()
    hot_state = _until("the high-priority job", lambda: _done(hot), 120)
    assert hot_state.status is xm.Status.COMPLETED, hot_state
    for job in sweep:
        state = _until("a preempted task to finish", lambda job=job: _done(job), 120)
        assert state.status is xm.Status.COMPLETED, (state, _log(job))
        assert state.attempt is not None and state.attempt > 1, state
        assert "preempted" in [a.failure for a in state.previous_attempts], state
        assert "attempt=2" in _log(job)


def test_slurm_preemption_of_the_last_attempt_is_final(xcore_env: Path) -> None:
    """max_attempts caps Slurm's own requeue: with Retry(max_attempts=2), attempt 2 (after a
    requeue) turns requeue off, so a preemption leaves it FAILED, class preempted, attempt 2.
    A policy that retries nothing (max_attempts=1) is submitted --no-requeue: preempted once,
    it stays failed."""
    import xhpc

    _configure(xcore_env, "slurm", "local")
    capped = xhpc.Slurm(partition="lowprio", requirements=xm.JobRequirements(cpu=4), retry=xm.Retry(max_attempts=2))
    never = xhpc.Slurm(partition="lowprio", requirements=xm.JobRequirements(cpu=4), retry=xm.Retry(max_attempts=1))
    with xm.create_experiment(title="cap") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(
            ['echo "attempt=$XCORE_ATTEMPT"; exec sleep 600']), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, capped))
        experiment.add(xm.Job(exe, never))
    two, one = experiment._all_jobs()
    _until("both to run", lambda: _running(two) and _running(one) and "attempt=1" in _log(two), 120)
    _sh("scontrol", "requeue", _slurm_task(two))
    _until("attempt 2 to run", lambda: "attempt=2" in _log(two) and _running(two) and _running(one), 120)
    with xm.create_experiment(title="urgent") as urgent:
        [exe] = urgent.package([xm.Packageable(xhpc.Command(["sleep 1"]), xhpc.Slurm.Spec())])
        urgent.add(xm.Job(exe, xhpc.Slurm(partition="highprio", requirements=xm.JobRequirements(cpu=8))))
    [hot] = urgent._all_jobs()
    assert _until("the high-priority job", lambda: _done(hot), 120).status is xm.Status.COMPLETED
    for job, attempt in ((two, 2), (one, 1)):
        state = _until("the preempted job's final state", lambda job=job: _done(job), 60)
        assert (state.status, state.failure, state.attempt or 1) == (xm.Status.FAILED, "preempted", attempt), state
        assert f"attempt={attempt + 1}" not in _log(job)


def test_sge_rescheduled_task_is_attempt_2(xcore_env: Path) -> None:
    """`qmod -rj` of a running (rerunnable) Grid Engine task: it runs again as attempt 2, its
    program sees XCORE_ATTEMPT=2, status lists the rescheduled run as a preempted attempt."""
    import xhpc

    _configure(xcore_env, "sge", "local")
    with xm.create_experiment(title="reschedule") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command([_WAIT_FOR_REQUEUE]), xhpc.GridEngine.Spec())])
        experiment.add(xm.Job(exe, xhpc.GridEngine()))
    [job] = experiment._all_jobs()
    # Grid Engine can lose a reschedule sent within a second of the start (the old run goes on
    # under a task that reads restarted): reschedule a run that has been up a few seconds.
    _until("the task to run for 3 s", lambda: _up_for(job, 3) and "attempt=1" in _log(job), 60)
    handle = _handle(job)
    _sh("qmod", "-rj", f"{handle.job_id}.{handle.task}")
    state = _until("attempt 2 to finish", lambda: _done(job), 120)
    assert state.status is xm.Status.COMPLETED, (state, _log(job))
    assert state.attempt == 2, state
    assert [(a.number, a.failure) for a in state.previous_attempts] == [(1, "preempted")], state
    log = _log(job)
    assert "attempt=2" in log and "first attempt left: seen" in log, log


def test_env_reads_the_real_environment_back_from_the_cluster(xcore_env: Path) -> None:
    """`env(handle)` over SSH: each task's own variables, unredacted, from the 0600 task file
    (shared ones from its first record, the task's own from its record), without what xcore
    adds (XCORE_ATTEMPT, XCORE_CHECKPOINT_DIR, the package variables); None once it is gone."""
    import shutil

    import xhpc
    from xcore.hooks.host import get_host

    _configure(xcore_env, "slurm", "ssh")
    with xm.create_experiment(title="env") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        for i in range(2):
            experiment.add(xm.Job(exe, xhpc.Slurm(), env_vars={"API_TOKEN": "s3cret=x\nline", "SEED": str(i)}))
    jobs = experiment.wait_until_complete(timeout=90)
    host = get_host()
    for i, job in enumerate(jobs):
        assert host.job_env(job.handle_kind, _handle(job)) == {"API_TOKEN": "s3cret=x\nline", "SEED": str(i)}
    run_dir = _handle(jobs[0]).run_dir
    assert stat.S_IMODE(os.stat(f"{run_dir}/tasks.bin").st_mode) == 0o600
    shutil.rmtree(run_dir)
    assert host.job_env(jobs[0].handle_kind, _handle(jobs[0])) is None


def test_sge_soft_limit_warning_checkpoints_and_attempt_2_resumes(xcore_env: Path) -> None:
    """Grid Engine: the warning is the soft limit's SIGUSR1 (s_rt = h_rt - signal_before_limit);
    the program saves and exits, the job script exits 99 (reschedule) and attempt 2 resumes."""
    import xhpc

    _configure(xcore_env, "sge", "local")
    executor = xhpc.GridEngine(time_limit=20, signal_before_limit=10,
                               retry=xm.Retry(max_attempts=2, on=("preemption", "node_failure", "timeout")))
    with xm.create_experiment(title="soft limit") as experiment:
        [exe] = experiment.package([xm.Packageable(xm.Binary("python3"), xhpc.GridEngine.Spec())])
        experiment.add(xm.Job(exe, executor, args=["-c", _RESUMABLE]))
    [job] = experiment._all_jobs()
    state = _until("the job to finish", lambda: _done(job), 90)
    log = _log(job)
    assert state.status is xm.Status.COMPLETED, (state, log)
    saved = log.split("attempt 1 saved step ")[1].split()[0]
    assert f"attempt 2 resumed at step {saved}" in log, log
    assert state.attempt == 2, state
    assert [a.failure for a in state.previous_attempts] == ["timeout"], state


def test_a_failure_the_scheduler_cannot_rerun_is_relaunched_by_an_observer(xcore_env: Path) -> None:
    """A class the job script does not retry itself (launch: the working directory is missing)
    reads FAILED; with a policy that retries it, the waiting xcore process submits attempt 2 as
    a new array job (its handle counts from attempt 2), and the store keeps both attempts."""
    import xhpc
    from xcore.launch.registry import open_store

    _configure(xcore_env, "slurm", "local")
    executor = xhpc.Slurm(workdir=f"/nonexistent-{uuid.uuid4().hex[:6]}",
                          retry=xm.Retry(max_attempts=2, on=("launch",)))
    with xm.create_experiment(title="relaunch") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, executor))
    first = _handle(experiment._all_jobs()[0])
    [job] = experiment.wait_until_complete(timeout=120)
    assert (job.status, job.message) == (xm.Status.FAILED, "exit code 98")
    second = _handle(job)
    assert second.job_id != first.job_id and (first.attempt, second.attempt) == (1, 2)
    attempts = open_store().job_attempts(experiment.experiment_id)[job.id]
    assert (attempts.current, attempts.failure, [a.failure for a in attempts.earlier]) == (2, "launch", ["launch"])


def test_xcore_retry_resubmits_failed_tasks_as_one_array_with_their_secrets(xcore_env: Path) -> None:
    """`experiment.retry()` on a Slurm sweep over SSH: the two failed tasks run again as attempt
    2 of the same units, in ONE new array job, with their real (secret) environment read back
    from the cluster's task file, and complete; the completed tasks are left alone."""
    import xhpc

    _configure(xcore_env, "slurm", "ssh")
    program = ('echo "attempt=$XCORE_ATTEMPT token=$API_TOKEN"; '
               '[ "$XCORE_ATTEMPT" -gt 1 ] || [ "$1" != fail ] || exit 3')
    with xm.create_experiment(title="retry") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command([program]), xhpc.Slurm.Spec())])
        for arg in ("ok", "fail", "ok", "fail"):
            experiment.add(xm.Job(exe, xhpc.Slurm(), args=[arg], env_vars={"API_TOKEN": "hunter2"}))
    jobs = experiment.wait_until_complete(timeout=90)
    assert [j.status for j in jobs] == [xm.Status.COMPLETED, xm.Status.FAILED] * 2
    first_ids = {_handle(j).job_id for j in jobs}
    plan = xm.get_experiment(experiment.experiment_id).retry()
    assert not plan.refused, plan.refused
    jobs = xm.get_experiment(experiment.experiment_id).wait_until_complete(timeout=90)
    assert all(j.status is xm.Status.COMPLETED for j in jobs), [(j.status, j.message) for j in jobs]
    again = [_handle(j) for j in jobs[1::2]]
    assert len({h.job_id for h in again}) == 1 and again[0].job_id not in first_ids  # one new array
    assert [h.attempt for h in again] == [2, 2]
    assert all(_handle(j).job_id in first_ids for j in jobs[0::2])  # untouched
    for job in jobs[1::2]:
        assert "attempt=2 token=hunter2" in _log(job), _log(job)


def _clocked(notes: Path) -> str:
    """A program that notes its attempt's start (and, failing with 75 in attempt 1, its end)
    by its own clock in ``notes`` (the same file system here)."""
    return (f'echo "$XCORE_ATTEMPT start $(date +%s.%N)" >> {notes}; [ "$XCORE_ATTEMPT" -gt 1 ] && exit 0; '
            f'echo "$XCORE_ATTEMPT end $(date +%s.%N)" >> {notes}; exit 75')


def _notes(notes: Path) -> dict[str, float]:
    return {f"{n} {what}": float(at) for n, what, at in (line.split() for line in notes.read_text().splitlines())}


@pytest.mark.parametrize(("scheduler", "backoff", "waiting"), [
    # Slurm itself holds a requeued task cred_expire (20 s here) + 1 s after it ended: only a
    # longer backoff shows; Grid Engine reschedules within about 10 s here.
    pytest.param("slurm", 32, "BeginTime", marks=pytest.mark.infra("slurm")),
    pytest.param("sge", 20, "held", marks=pytest.mark.infra("sge")),
])
def test_a_retried_exit_code_waits_its_backoff(xcore_env: Path, scheduler: str, backoff: int, waiting: str) -> None:
    """Retry(exit_codes=(75,), backoff_secs=N): the job script requeues the task and the next
    attempt may not start before N s (Slurm: the task's start time, pending BeginTime; Grid
    Engine: the task held and released by a job submitted for that time). Attempt 2 starts N s
    or more after attempt 1 ended, by the job's own clock."""
    import xhpc

    _configure(xcore_env, scheduler, "local")
    notes = xcore_env / "notes"
    kind = xhpc.Slurm if scheduler == "slurm" else xhpc.GridEngine
    executor = kind(retry=xm.Retry(max_attempts=2, on=(), exit_codes=(75,), backoff_secs=backoff))
    with xm.create_experiment(title="backoff") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command([_clocked(notes)]), kind.Spec())])
        experiment.add(xm.Job(exe, executor))
    [job] = experiment._all_jobs()
    _until(f"attempt 2 to wait ({waiting})", lambda: waiting in _state(job).message, backoff)
    state = _until("attempt 2 to finish", lambda: _done(job), backoff + 60)
    log = _log(job)
    assert (state.status, state.attempt) == (xm.Status.COMPLETED, 2), (state, log)
    times = _notes(notes)
    assert times["2 start"] - times["1 end"] >= backoff, (times, log)
    assert f"attempt 2 starts in {backoff} s or later (backoff)" in log, log


def test_sge_reschedules_beyond_max_attempts_are_refused(xcore_env: Path) -> None:
    """Grid Engine reschedules a rerunnable task however often it is asked (-r y is the whole
    array's): with Retry(max_attempts=2), two `qmod -rj` leave the task FAILED, its third run
    refused by the job script (the program ran exactly twice), with the class of attempt 2."""
    import xhpc

    _configure(xcore_env, "sge", "local")
    runs = xcore_env / "runs"
    with xm.create_experiment(title="cap") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(
            [f'echo "$XCORE_ATTEMPT" >> {runs}; echo "attempt=$XCORE_ATTEMPT"; exec sleep 600']),
            xhpc.GridEngine.Spec())])
        experiment.add(xm.Job(exe, xhpc.GridEngine(retry=xm.Retry(max_attempts=2))))
    [job] = experiment._all_jobs()
    handle = _handle(job)
    try:
        for attempt in (1, 2):  # a run up a few seconds (a reschedule at its start can be lost)
            up = f"attempt={attempt}"
            _until(f"attempt {attempt} to run for 3 s", lambda up=up: _up_for(job, 3) and up in _log(job), 60)
            _sh("qmod", "-rj", f"{handle.job_id}.{handle.task}")
        state = _until("the refused attempt to end", lambda: _done(job), 60)
    finally:
        subprocess.run(["qdel", handle.job_id], capture_output=True, timeout=30)
    log = _log(job)
    assert (state.status, state.attempt, state.failure) == (xm.Status.FAILED, 3, "preempted"), (state, log)
    assert state.message.startswith("attempt 3 refused: max_attempts=2 used up"), state
    assert [(a.number, a.failure) for a in state.previous_attempts] == [(1, "preempted"), (2, "preempted")], state
    assert "xhpc: attempt 3 refused: max_attempts=2 used up" in log, log
    assert runs.read_text().split() == ["1", "2"]
