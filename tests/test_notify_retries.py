"""Notifications of retries (issues 23 and 28): a failed attempt that its policy retries is
announced as one ``retry`` event per new attempt, never as ``unit_failed``; only the failure
that ends the unit is."""

from __future__ import annotations

import json
import time
from pathlib import Path

from notify_helpers import receiver

import xcore as xm
from core_helpers import start_xcore_fake
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.model.status import Status
from xcore.paths import config_dir
from xcore.runtime.notifications import events, sinks
from xcore.runtime.tracking import refresh_jobs
from xcore.store.records import ExperimentRecord, JobRecord
from xcore.testing import fake, plugin_host

SECRET = "retry-signing-key"


def _configure(sink: str) -> None:
    path = config_dir() / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sink)


def _launch(units: int, retry: xm.Retry) -> int:
    plugin_host({"fake": fake})
    with xm.create_experiment("preemptible") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for i in range(units):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True, retry=retry), args={"trial": i}))
    return experiment.experiment_id


def _jobs(experiment_id: int) -> list[JobRecord]:
    return [job for unit in open_store().work_units(experiment_id) for job in unit.jobs]


def _preempt(job: JobRecord) -> None:
    fake.preempt(get_host().serializer.load(job.handle))


def _events(experiment_id: int) -> list[str]:
    return sorted(n.event_id for n in open_store().notifications(experiment_id))


def test_each_relaunch_is_one_retry_event_at_once_and_only_the_last_failure_is_unit_failed():
    _configure('[[notifications.sinks]]\nname = "log"\ntype = "command"\ncommand = ["true"]\n')
    experiment_id = _launch(1, xm.Retry(max_attempts=3))
    store = open_store()
    [job] = _jobs(experiment_id)
    prefix = f"exp-{experiment_id}/unit-1"
    _preempt(job)
    refresh_jobs(store, get_host(), _jobs(experiment_id))  # sees the preemption and relaunches
    [job] = _jobs(experiment_id)
    assert job.attempt == 2
    # Announced by the observer that relaunched it, not at the new attempt's first change.
    assert _events(experiment_id) == [f"{prefix}/job-{job.id}/retry/attempt-2"]
    refresh_jobs(store, get_host(), _jobs(experiment_id))
    assert len(_events(experiment_id)) == 1  # seen again: nothing new
    _preempt(job)
    refresh_jobs(store, get_host(), _jobs(experiment_id))
    assert _events(experiment_id) == [f"{prefix}/job-{job.id}/retry/attempt-{n}" for n in (2, 3)]
    _preempt(_jobs(experiment_id)[0])  # the third attempt fails too: the policy is spent
    refresh_jobs(store, get_host(), _jobs(experiment_id))
    [job] = _jobs(experiment_id)
    assert (job.status, job.attempt) == (Status.FAILED, 3)
    assert _events(experiment_id) == [f"exp-{experiment_id}/ended", f"{prefix}/failed/attempt-3",
                                      *(f"{prefix}/job-{job.id}/retry/attempt-{n}" for n in (2, 3))]
    [retry] = [json.loads(n.body) for n in store.notifications(experiment_id) if n.event_id.endswith("attempt-2")]
    assert retry["type"] == "retry" and retry["job"]["attempt"] == 2 and retry["unit"]["id"] == 1


def test_an_attempt_no_observer_saw_still_gets_its_retry_event():
    """A backend that retried twice between two polls: the observer reads attempt 3 and
    announces attempts 2 and 3, each under its own id."""
    record = ExperimentRecord(5, "t", status_counts={"RUNNING": 1}, launch_status="LAUNCHED")
    job = JobRecord(9, 5, 2, "train", "k", {}, {}, [], {}, status=Status.RUNNING, attempt=3)
    found = events.unit_events(record, [], [job])
    assert [(e["id"], e["job"]["attempt"], e["job"]["current_attempt"]) for e in found] == [
        ("exp-5/unit-2/job-9/retry/attempt-2", 2, 3), ("exp-5/unit-2/job-9/retry/attempt-3", 3, 3)]
    assert found[0]["text"].endswith("job train went to attempt 2 (now on attempt 3)")
    assert found[1]["text"].endswith("job train is on attempt 3")


def _wait_until(check, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_two_observers_deliver_one_signed_retry_per_relaunch_and_no_unit_failed_before_the_end(monkeypatch):
    """Three preemptible units watched by two `xcore wait` at once: each preemption is one
    relaunch and one signed `retry` event at the receiver; when the second attempts fail too
    (a policy of 2), each unit is one `unit_failed` (attempt 2), and the end is one event."""
    monkeypatch.setenv("XCORE_TEST_HOOK_SECRET", SECRET)
    with receiver() as hook:
        _configure(f'[[notifications.sinks]]\nname = "hook"\ntype = "webhook"\nurl = "{hook.url}"\n'
                   'secret_env = "XCORE_TEST_HOOK_SECRET"\n')
        experiment_id = _launch(3, xm.Retry(max_attempts=2))
        observers = [start_xcore_fake("wait", str(experiment_id)) for _ in range(2)]
        for job in _jobs(experiment_id):
            _preempt(job)
        _wait_until(lambda: all(j.attempt == 2 and j.handle is not None for j in _jobs(experiment_id)),
                    "the preempted jobs were not relaunched")
        hook.wait_for(3)
        for observer in observers:
            assert observer.poll() is None, observer.communicate()  # both still watching
        for job in _jobs(experiment_id):
            fake.set_state(get_host().serializer.load(job.handle), Status.FAILED, "exit code 1", 1, failure="error")
        for observer in observers:
            _, err = observer.communicate(timeout=120)
            assert observer.returncode == 1, err
            assert "warning" not in err, err
        requests = hook.wait_for(7)
        store = open_store()
        assert [n.state for n in store.notifications(experiment_id)] == ["sent"] * 7
    assert len(requests) == 7, [body for _, body in requests]
    for headers, body in requests:
        assert sinks.verify(SECRET, headers["x-xcore-signature"], body)
    got = [json.loads(body) for _, body in requests]
    jobs = {j.work_unit_id: j.id for j in _jobs(experiment_id)}
    assert sorted(e["id"] for e in got) == sorted(
        [f"exp-{experiment_id}/ended"]
        + [f"exp-{experiment_id}/unit-{u}/failed/attempt-2" for u in jobs]
        + [f"exp-{experiment_id}/unit-{u}/job-{j}/retry/attempt-2" for u, j in jobs.items()])
    # The three retries came before any failure was set: no unit read failed while retried.
    assert [e["type"] for e in got[:3]] == ["retry"] * 3


def test_a_relaunch_refused_for_its_secrets_is_the_units_failure():
    """The retry cannot happen (the backend lost the secret): the unit ends FAILED, and that
    is its one `unit_failed`, with no `retry`."""
    _configure('[[notifications.sinks]]\nname = "log"\ntype = "command"\ncommand = ["true"]\n')
    plugin_host({"fake": fake})
    with xm.create_experiment("secret") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True), env_vars={"API_TOKEN": "s3cret"}))
    experiment_id = experiment.experiment_id
    [job] = _jobs(experiment_id)
    handle = get_host().serializer.load(job.handle)
    fake.preempt(handle)
    record = json.loads(Path(handle.record).read_text())
    record["env"] = {}
    Path(handle.record).write_text(json.dumps(record))
    refresh_jobs(open_store(), get_host(), [job])
    [job] = _jobs(experiment_id)
    assert (job.status, job.attempt) == (Status.FAILED, 1)
    assert _events(experiment_id) == [f"exp-{experiment_id}/ended", f"exp-{experiment_id}/unit-1/failed/attempt-1"]
