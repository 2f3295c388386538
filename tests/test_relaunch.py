"""A backend that cannot retry (the fake one, as a Vertex CustomJob): a failed attempt whose
policy retries it reads active and is relaunched as the next attempt by whichever xcore
process observes it, exactly once, even with several observers racing or one killed midway."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import xcore as xm
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.model.status import JobState, Status
from xcore.runtime.tracking import refresh_jobs
from xcore.testing import fake, plugin_host


def _launch(executor: fake.FakeExecutor, units: int = 1) -> int:
    plugin_host({"fake": fake})
    with xm.create_experiment("preemptible") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for i in range(units):
            experiment.add(xm.Job(exe, executor, args={"i": i}))
    return experiment.experiment_id


def _jobs(experiment_id: int):
    return [job for unit in open_store().work_units(experiment_id) for job in unit.jobs]


def _handle(job):
    return get_host().serializer.load(job.handle)


def _records(job_id: int) -> list[dict]:
    found = []
    for path in (_state_dir() / "jobs").glob("*.json"):
        data = json.loads(path.read_text())
        if data["job_id"] == job_id:
            found.append(data)
    return sorted(found, key=lambda d: d["attempt"])


def _state_dir() -> Path:
    from xcore.paths import plugin_state_dir

    return plugin_state_dir("fake")


def test_a_preempted_job_is_relaunched_once_and_completes_as_attempt_2():
    experiment_id = _launch(fake.FakeExecutor(hold=True))
    [job] = _jobs(experiment_id)
    fake.preempt(_handle(job))
    store = open_store()
    refresh_jobs(store, get_host(), [job])  # observes the preemption: relaunches (the default policy)
    [job] = _jobs(experiment_id)
    assert (job.attempt, job.status, job.message) == (2, Status.PENDING, "submitted")
    refresh_jobs(store, get_host(), [job])  # a later poll relaunches nothing more
    assert [r["attempt"] for r in _records(job.id)] == [1, 2]
    fake.set_state(_handle(job), Status.COMPLETED, "exit code 0", 0)
    refresh_jobs(store, get_host(), [job])
    [job] = _jobs(experiment_id)
    assert job.status is Status.COMPLETED and store.work_units(experiment_id)[0].status is Status.COMPLETED
    [earlier] = store.job_attempts(experiment_id)[job.id].earlier
    assert (earlier.number, earlier.status, earlier.failure) == (1, Status.FAILED, "preempted")


def test_a_program_error_is_not_retried_by_default_and_is_when_the_policy_says_so():
    plain = _launch(fake.FakeExecutor(hold=True))
    [job] = _jobs(plain)
    fake.set_state(_handle(job), Status.FAILED, "exit code 3", 3, failure="error")
    refresh_jobs(open_store(), get_host(), [job])
    [job] = _jobs(plain)
    assert (job.status, job.attempt) == (Status.FAILED, 1)

    retried = _launch(fake.FakeExecutor(hold=True, retry=xm.Retry(max_attempts=2, exit_codes=(3,))))
    [job] = _jobs(retried)
    fake.set_state(_handle(job), Status.FAILED, "exit code 3", 3, failure="error")
    refresh_jobs(open_store(), get_host(), [job])
    [job] = _jobs(retried)
    assert (job.status, job.attempt) == (Status.PENDING, 2)
    fake.set_state(_handle(job), Status.FAILED, "exit code 3", 3, failure="error")
    refresh_jobs(open_store(), get_host(), [job])
    [job] = _jobs(retried)
    assert (job.status, job.attempt) == (Status.FAILED, 2)  # the policy's two attempts are spent


def test_a_relaunch_whose_secrets_are_gone_is_refused_with_their_names():
    plugin_host({"fake": fake})
    with xm.create_experiment("secret") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True), env_vars={"API_TOKEN": "s3cret", "MODE": "x"}))
    [job] = _jobs(experiment.experiment_id)
    assert job.env["API_TOKEN"] == "<redacted>"
    handle = _handle(job)
    fake.preempt(handle)
    record = json.loads(Path(handle.record).read_text())
    record["env"] = {"MODE": "x"}  # the backend lost the secret
    Path(handle.record).write_text(json.dumps(record))
    refresh_jobs(open_store(), get_host(), [job])
    [job] = _jobs(experiment.experiment_id)
    assert job.status is Status.FAILED and "API_TOKEN" in job.message and "<redacted>" not in job.message


def test_a_relaunch_gets_the_real_secret_back_from_the_backend():
    plugin_host({"fake": fake})
    with xm.create_experiment("secret") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True), env_vars={"API_TOKEN": "s3cret"}))
    [job] = _jobs(experiment.experiment_id)
    fake.preempt(_handle(job))
    refresh_jobs(open_store(), get_host(), [job])
    [job] = _jobs(experiment.experiment_id)
    assert job.attempt == 2 and fake.received(_handle(job))[1]["API_TOKEN"] == "s3cret"


OBSERVER = textwrap.dedent("""
    import sys, time
    from xcore.testing import fake, plugin_host
    plugin_host({"fake": fake})
    from xcore.hooks.host import get_host
    from xcore.launch.registry import open_store
    from xcore.runtime.tracking import refresh_jobs
    experiment_id, start = int(sys.argv[1]), float(sys.argv[2])
    store = open_store()
    jobs = store.active_jobs([experiment_id])
    while time.time() < start:
        time.sleep(0.001)
    refresh_jobs(store, get_host(), jobs)
""")


def test_three_racing_observers_relaunch_each_preempted_job_exactly_once(tmp_path):
    experiment_id = _launch(fake.FakeExecutor(hold=True), units=6)
    for job in _jobs(experiment_id):
        fake.preempt(_handle(job))
    script = tmp_path / "observe.py"
    script.write_text(OBSERVER)
    start = time.time() + 3  # every observer has read the same active jobs by then
    procs = [subprocess.Popen([sys.executable, str(script), str(experiment_id), str(start)],
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for proc in procs:
        assert proc.wait(120) == 0, proc.stderr.read() if proc.stderr else ""
    jobs = _jobs(experiment_id)
    assert [j.attempt for j in jobs] == [2] * 6
    for job in jobs:
        assert [r["attempt"] for r in _records(job.id)] == [1, 2]  # one relaunch each, never two


KILLED_OBSERVER = textwrap.dedent("""
    import sys
    from xcore.testing import fake, plugin_host
    plugin_host({"fake": fake})
    from xcore.hooks.host import get_host
    from xcore.launch.registry import open_store
    from xcore.runtime.tracking import refresh_jobs
    store = open_store()
    refresh_jobs(store, get_host(), store.active_jobs([int(sys.argv[1])]))
""")


def test_an_observer_killed_between_submitting_and_recording_never_causes_a_second_relaunch(tmp_path):
    marker = tmp_path / "submitted"
    Path(str(marker) + ".release").write_text("")  # the first launch does not pause
    experiment_id = _launch(fake.FakeExecutor(hold=True, pause_after_launch=str(marker)))
    marker.unlink()
    Path(str(marker) + ".release").unlink()  # the relaunch pauses once its batch reached the backend
    [job] = _jobs(experiment_id)
    fake.preempt(_handle(job))
    script = tmp_path / "observe.py"
    script.write_text(KILLED_OBSERVER)
    observer = subprocess.Popen([sys.executable, str(script), str(experiment_id)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert observer.poll() is None, observer.communicate()[1]
        assert time.monotonic() < deadline, "the observer never relaunched"
        time.sleep(0.05)
    observer.send_signal(signal.SIGKILL)
    observer.wait()
    [job] = _jobs(experiment_id)
    assert (job.attempt, job.status, job.handle) == (2, Status.LAUNCHING, None)  # claimed, not recorded
    Path(str(marker) + ".release").write_text("")
    from xcore.cli.main import main

    assert main(["show", str(experiment_id)]) == 0  # resolves the dead observer's lease: adopts attempt 2
    [job] = _jobs(experiment_id)
    assert job.attempt == 2 and job.handle is not None and job.status.is_active
    assert [r["attempt"] for r in _records(job.id)] == [1, 2]
    main(["show", str(experiment_id)])
    assert [r["attempt"] for r in _records(job.id)] == [1, 2]


def test_show_and_logs_tell_the_attempts_apart(capsys):
    from xcore.cli.main import main

    experiment_id = _launch(fake.FakeExecutor(hold=True))
    [job] = _jobs(experiment_id)
    first = _handle(job)
    fake.write_output(first, "attempt one\n")
    fake.preempt(first)
    refresh_jobs(open_store(), get_host(), [job])
    [job] = _jobs(experiment_id)
    fake.write_output(_handle(job), "attempt two\n")
    fake.set_state(_handle(job), Status.COMPLETED, "exit code 0", 0)
    capsys.readouterr()
    assert main(["show", str(experiment_id), "--json"]) == 0
    [unit] = json.loads(capsys.readouterr().out)["work_units"]
    [shown] = unit["jobs"]
    assert unit["status"] == "COMPLETED" and shown["attempt"] == 2 and shown["failure"] == "preempted"
    assert [(a["number"], a["status"], a["failure"]) for a in shown["attempts"]] == [
        (1, "FAILED", "preempted"), (2, "COMPLETED", None)]
    assert main(["show", str(experiment_id)]) == 0
    table = capsys.readouterr().out
    assert "ATTEMPTS" in table and "2 (last: preempted)" in table
    assert main(["logs", f"{experiment_id}/1"]) == 0 and capsys.readouterr().out == "attempt two\n"
    assert main(["logs", f"{experiment_id}/1", "--attempt", "1"]) == 0
    assert capsys.readouterr().out == "attempt one\n"
    assert main(["logs", f"{experiment_id}/1", "--attempt", "3"]) == 1
    assert "has no attempt 3" in capsys.readouterr().err


def test_a_wait_follows_the_relaunched_attempt():
    import threading

    experiment_id = _launch(fake.FakeExecutor(hold=True))
    [job] = _jobs(experiment_id)
    fake.preempt(_handle(job))

    def finish_attempt_2() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            [fresh] = _jobs(experiment_id)
            if fresh.attempt == 2 and fresh.handle is not None:
                fake.set_state(_handle(fresh), Status.COMPLETED, "exit code 0", 0)
                return
            time.sleep(0.05)

    finisher = threading.Thread(target=finish_attempt_2)
    finisher.start()
    from xcore.cli.main import main

    assert main(["wait", str(experiment_id), "--timeout", "60"]) == 0  # the wait relaunches it and follows attempt 2
    finisher.join()
    [job] = _jobs(experiment_id)
    assert (job.status, job.attempt) == (Status.COMPLETED, 2)


def test_a_cancelled_unit_whose_retry_was_pending_is_not_relaunched():
    from xcore.cli.main import main

    experiment_id = _launch(fake.FakeExecutor(hold=True))
    [job] = _jobs(experiment_id)
    store = open_store()
    store.record_states([(job.id, JobState(Status.PENDING, "retry pending: attempt 1 of 3 failed (preempted)",
                                           failure="preempted"))])  # an observer saw it, none relaunched yet
    fake.preempt(_handle(job))
    assert main(["cancel", str(experiment_id)]) == 0
    [job] = _jobs(experiment_id)
    assert (job.attempt, job.status) == (1, Status.FAILED)
    assert [r["attempt"] for r in _records(job.id)] == [1]


def test_a_relaunch_that_cannot_be_submitted_is_recorded_with_its_reason(monkeypatch):
    from xcore.errors import LaunchError

    experiment_id = _launch(fake.FakeExecutor(hold=True))
    [job] = _jobs(experiment_id)
    fake.preempt(_handle(job))

    def refuse(executor_kind, requests, context):
        raise LaunchError("quota exhausted: ask for more")

    monkeypatch.setattr(fake, "xcore_launch", fake.hookimpl(refuse))
    plugin_host({"fake": fake})
    refresh_jobs(open_store(), get_host(), [job])
    [job] = _jobs(experiment_id)
    assert (job.attempt, job.status) == (2, Status.FAILED)
    assert "quota exhausted: ask for more" in job.message
    assert open_store().job_attempts(experiment_id)[job.id].failure == "launch"


def _race(monkeypatch, step: str, experiment_id: int) -> list:
    """Observer B reads the jobs' attempt-1 states; at ``step`` of B's poll (``read``: once the
    backend answered, ``decided``: once B decided what to record), observer A polls the same
    jobs and relaunches them. B's poll then ends; its records are returned."""
    from xcore.hooks.host import PluginHost
    from xcore.runtime import retries

    stale = _jobs(experiment_id)  # what B loaded: attempt 1 and its handle
    host = get_host()

    def observer_a() -> None:
        refresh_jobs(open_store(), host, _jobs(experiment_id))
        assert {j.attempt for j in _jobs(experiment_id)} == {2}  # A relaunched them

    if step == "read":
        original = PluginHost.job_states

        def read_then_a(self, kind, handles):
            states = original(self, kind, handles)
            monkeypatch.setattr(PluginHost, "job_states", original)
            observer_a()
            return states

        monkeypatch.setattr(PluginHost, "job_states", read_then_a)
    else:
        decide = retries.pending

        def decided_then_a(store, reached):
            out = decide(store, reached)
            monkeypatch.setattr(retries, "pending", decide)
            observer_a()
            return out

        monkeypatch.setattr(retries, "pending", decided_then_a)
    return refresh_jobs(open_store(), host, stale)


@pytest.mark.parametrize("step", ["read", "decided"])
def test_an_observer_that_read_the_failed_attempt_before_another_relaunched_it_records_nothing_over_it(
        monkeypatch, step):
    """Two observers poll the same preempted jobs; A relaunches them while B, which read
    attempt 1's FAILED, is still polling. B must not record attempt 1's state over attempt 2:
    not FAILED (the policy of 2 is not spent by attempt 1: the unit read failed and the
    experiment ended while attempt 2 ran), not a second retry pending (attempt 3 launched for
    one preemption)."""
    experiment_id = _launch(fake.FakeExecutor(hold=True, retry=xm.Retry(max_attempts=2)), units=2)
    for job in _jobs(experiment_id):
        fake.preempt(_handle(job))
    seen_by_b = _race(monkeypatch, step, experiment_id)
    store = open_store()
    for job in _jobs(experiment_id):
        assert (job.attempt, job.status, job.message) == (2, Status.PENDING, "submitted")
        assert [r["attempt"] for r in _records(job.id)] == [1, 2]
    assert [u.status for u in store.work_units(experiment_id)] == [Status.PENDING] * 2
    assert [(j.attempt, j.status) for j in seen_by_b] == [(2, Status.PENDING)] * 2  # B follows attempt 2
    refresh_jobs(store, get_host(), _jobs(experiment_id))  # a later poll: nothing to relaunch
    assert [[r["attempt"] for r in _records(j.id)] for j in _jobs(experiment_id)] == [[1, 2]] * 2


def test_a_wait_that_read_a_failure_xcore_retry_relaunched_meanwhile_follows_the_new_attempt(monkeypatch, capsys):
    """A job without a retry policy fails. A wait reads its FAILED from the backend; before the
    wait records it, another observer records the failure and the user's `xcore retry` relaunches
    the job as attempt 2. The store refuses the wait's attempt-1 state; the wait must then follow
    attempt 2 (and keep waiting), not report the old failure as the job's end."""
    from xcore.cli.main import main
    from xcore.hooks.host import PluginHost

    experiment_id = _launch(fake.FakeExecutor(hold=True))
    stale = _jobs(experiment_id)  # what the wait loaded: attempt 1 and its handle
    fake.set_state(_handle(stale[0]), Status.FAILED, "exit code 1", exit_code=1)
    host = get_host()
    original = PluginHost.job_states

    def read_then_retried(self, kind, handles):
        states = original(self, kind, handles)
        monkeypatch.setattr(PluginHost, "job_states", original)
        refresh_jobs(open_store(), host, _jobs(experiment_id))  # another observer records the failure
        assert main(["retry", str(experiment_id), "--failed"]) == 0, capsys.readouterr().err
        return states

    monkeypatch.setattr(PluginHost, "job_states", read_then_retried)
    [seen] = refresh_jobs(open_store(), host, stale)
    [job] = _jobs(experiment_id)
    assert (job.attempt, job.status) == (2, Status.PENDING)  # the store kept attempt 2
    assert (seen.attempt, seen.status, seen.handle) == (2, Status.PENDING, job.handle)  # the wait follows it
    assert open_store().job_attempts(experiment_id)[job.id].earlier[0].status is Status.FAILED
