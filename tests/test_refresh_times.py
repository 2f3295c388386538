"""A status refresh returns the start and end times the store records: a backend that reports
no times (the fake one, or Grid Engine for a task cancelled while held) must not leave the
returned records without an end while `xcore show` has one."""

from __future__ import annotations

from pathlib import Path

import pytest

import xcore as xm
from xcore.model.status import JobState, Status, recorded_times
from xcore.testing import fake, plugin_host


def _stored(experiment: xm.Experiment) -> dict[int, tuple[float | None, float | None]]:
    return {job.id: (job.started_at, job.ended_at) for job in experiment._all_jobs()}


def test_wait_until_complete_returns_the_times_the_store_recorded(xcore_home: Path):
    plugin_host({"fake": fake})
    with xm.create_experiment("times") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for i in range(3):
            experiment.add(xm.Job(exe, fake.FakeExecutor(), args=[str(i)]))
    jobs = experiment.wait_until_complete(timeout=60)
    assert {j.status for j in jobs} == {Status.COMPLETED}
    returned = {job.id: (job.started_at, job.ended_at) for job in jobs}
    assert all(ended is not None for _, ended in returned.values()), returned  # was None: the fake reports no times
    assert returned == _stored(experiment)


def test_a_cancelled_job_returns_the_end_the_store_recorded(xcore_home: Path):
    plugin_host({"fake": fake})
    with xm.create_experiment("cancelled") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))  # reported RUNNING until cancelled
    experiment.stop()
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.status is Status.CANCELLED
    assert job.ended_at is not None and (job.started_at or 0) <= job.ended_at
    assert {job.id: (job.started_at, job.ended_at)} == _stored(experiment)


@pytest.mark.parametrize(("state", "started", "ended", "expected"), [
    (JobState(Status.RUNNING), None, None, (100.0, None)),  # first seen running: started now
    (JobState(Status.RUNNING, started_at=40.0), None, None, (40.0, None)),  # the backend's start wins
    (JobState(Status.COMPLETED), 50.0, None, (50.0, 100.0)),  # ended now
    (JobState(Status.COMPLETED, ended_at=70.0), 50.0, None, (50.0, 70.0)),
    (JobState(Status.CANCELLED), None, None, (None, 100.0)),  # never ran: no start, no duration
    (JobState(Status.FAILED, ended_at=30.0), None, None, (30.0, 30.0)),  # first seen ended: no negative duration
    (JobState(Status.COMPLETED, ended_at=90.0), 50.0, 60.0, (50.0, 60.0)),  # a recorded end is kept
    (JobState(Status.PENDING), None, None, (None, None)),
])
def test_recorded_times(state: JobState, started: float | None, ended: float | None,
                        expected: tuple[float | None, float | None]):
    assert recorded_times(state, started, ended, now=100.0) == expected
