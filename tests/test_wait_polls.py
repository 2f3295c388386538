"""What a wait (`xcore wait`, `launch --wait`) costs per poll, and that its answer stays the
stored final states: records of active jobs are read once, each poll reads only the stored
statuses and asks the backend about the jobs still active (issue 14).

On the fake backend: its jobs are held and each ends, with its exit code, after its seconds."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

import xcore as xm
from xcore.cli import commands
from xcore.hooks.host import get_host
from xcore.model.status import JobState, Status
from xcore.plugin import exit_state
from xcore.runtime import tracking
from xcore.testing import fake, plugin_host


def open_store() -> Any:
    return commands._store()


@pytest.fixture(autouse=True)
def fake_backend() -> None:
    plugin_host({"fake": fake})


def _launch(jobs: list[tuple[float, int]]) -> int:
    """An experiment of one job per ``(seconds, exit code)``: each ends so, that long after the launch."""
    with xm.create_experiment("polls") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "/bin/true")])
        for secs, code in jobs:
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True), args={"secs": secs, "code": code}))
    serializer = get_host().serializer
    for unit in open_store().work_units(experiment.experiment_id):
        for job in unit.jobs:
            secs, code = (float(arg.split("=")[1]) for arg in job.args)
            state = exit_state(int(code))
            ended = threading.Timer(secs, fake.set_state, (serializer.load(job.handle), state.status, state.message,
                                                             state.exit_code))
            ended.daemon = True
            ended.start()
    return experiment.experiment_id


class _CountingStore:
    """The real store, counting the calls of some methods."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in ("active_jobs", "job_statuses", "work_units", "record_states"):
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls.append(name)
                return attr(*args, **kwargs)

            return counted
        return attr


def _wait_json(store: Any, experiment_id: int, capsys: pytest.CaptureFixture[str], **kwargs: Any) -> tuple[int, Any]:
    capsys.readouterr()
    code = commands._wait_experiment(store, experiment_id, None, as_json=True, **kwargs)
    return code, json.loads(capsys.readouterr().out)


def test_each_poll_reads_statuses_not_the_records_of_active_jobs(monkeypatch, capsys):
    monkeypatch.setattr(tracking, "NOTIFIED_MAX_INTERVAL", 0.1)  # several polls while the jobs run
    experiment_id = _launch([(0.8, 0), (0.8, 3), (0, 0)])
    store = _CountingStore(open_store())
    code, answer = _wait_json(store, experiment_id, capsys)
    assert store.calls.count("job_statuses") >= 3, store.calls  # the start, then one per poll after the first
    assert store.calls.count("active_jobs") == 1, store.calls  # the old wait read them again on every poll
    assert code == commands.EXIT_FAILED and answer["ok"] is False
    # The answer is what the store holds, job by job (the records returned by the polls
    # carry no specs: compare what they do carry).
    stored = {j.id: j for u in open_store().work_units(experiment_id) for j in u.jobs}
    assert sorted(j["id"] for j in answer["jobs"]) == sorted(stored)
    for job in answer["jobs"]:
        record = stored[job["id"]]
        assert (job["status"], job["exit_code"], job["message"], job["started_at"], job["ended_at"]) == (
            record.status.value, record.exit_code, record.message, record.started_at, record.ended_at)
    assert sorted(j["status"] for j in answer["jobs"]) == ["COMPLETED", "COMPLETED", "FAILED"]


def test_a_job_another_process_saw_end_is_answered_as_stored(monkeypatch, capsys):
    """Between two polls another process records that a job ended (here: FAILED with its
    words, while the job still runs): the wait answers what the store says, not what it
    would have asked the backend about a record kept from an earlier poll."""
    monkeypatch.setattr(tracking, "NOTIFIED_MAX_INTERVAL", 0.1)
    experiment_id = _launch([(1.2, 0), (1.2, 0)])
    store = open_store()
    first_job = min(j.id for u in store.work_units(experiment_id) for j in u.jobs)
    polled = threading.Event()
    real = store.job_statuses
    calls = 0

    def job_statuses(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # the second poll's (the first poll read the records)
            open_store().record_states([(first_job, JobState(Status.FAILED, "ended elsewhere", 9, 1.0, 2.0))])
            polled.set()
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "job_statuses", job_statuses)
    code, answer = _wait_json(store, experiment_id, capsys)
    assert polled.is_set()
    by_id = {j["id"]: j for j in answer["jobs"]}
    assert (by_id[first_job]["status"], by_id[first_job]["message"], by_id[first_job]["exit_code"]) == (
        "FAILED", "ended elsewhere", 9)
    assert code == commands.EXIT_FAILED
    assert [j["status"] for j in answer["jobs"] if j["id"] != first_job] == ["COMPLETED"]


def _order_of_backend_calls(monkeypatch) -> list[str]:
    host = get_host()
    calls: list[str] = []
    for name in ("job_states", "wait_for_change"):
        real = getattr(host, name)

        def called(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(host, name, called)
    return calls


def test_launch_wait_does_not_ask_the_backend_before_its_first_pause(monkeypatch, capsys):
    """Right after a launch every job is pending as recorded: the first poll draws the
    progress from the store and waits for a change; `xcore wait` (perhaps with --timeout 0)
    still asks the backend first."""
    experiment_id = _launch([(0.3, 0), (0.3, 0)])
    calls = _order_of_backend_calls(monkeypatch)
    code, answer = _wait_json(open_store(), experiment_id, capsys, just_launched=True)
    assert code == 0 and [j["status"] for j in answer["jobs"]] == ["COMPLETED"] * 2
    assert calls[0] == "wait_for_change" and "job_states" in calls, calls

    experiment_id = _launch([(0.3, 0)])
    calls.clear()
    code, answer = _wait_json(open_store(), experiment_id, capsys)
    assert code == 0 and calls[0] == "job_states", calls


def test_handles_are_loaded_once_per_wait(monkeypatch, capsys):
    monkeypatch.setattr(tracking, "NOTIFIED_MAX_INTERVAL", 0.1)
    experiment_id = _launch([(0.6, 0), (0.6, 0), (0.6, 0)])
    serializer = get_host().serializer
    loads: list[int] = []
    real = serializer.load

    def load(value: Any) -> Any:
        loads.append(1)
        return real(value)

    monkeypatch.setattr(serializer, "load", load)
    started = time.monotonic()
    code, _ = _wait_json(open_store(), experiment_id, capsys)
    assert code == 0 and time.monotonic() - started < 30
    assert len(loads) == 3, len(loads)  # one per job, not one per job and poll
