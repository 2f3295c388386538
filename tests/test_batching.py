"""The batching rule (``xcore.runtime.launcher``): submissions follow what the script does, not timing.

Run on the fake backend; its executor is given the batching class attributes of the executor
it stands for (``LOCAL_LIKE``: ``xlocal.Local``'s), so each test names the rule it checks.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import fake, plugin_host

# xlocal.Local's batching class attributes (plugins/xlocal/tests/test_local_batching.py checks them there).
LOCAL_LIKE = {"batch_first_max_age": 0.0, "batch_max_age": 0.05}


@pytest.fixture(autouse=True)
def fake_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake backend installed, its executor batching like ``xlocal.Local``, its batches counted anew."""
    plugin_host({"fake": fake})
    for name, value in LOCAL_LIKE.items():
        monkeypatch.setattr(fake.FakeExecutor, name, value, raising=False)
    monkeypatch.setattr(fake, "LAUNCH_BATCHES", [])


def _runs(home: Path) -> list[int]:
    """The submissions the backend got so far (one ``xcore_launch`` call each; ``home`` unused)."""
    return list(fake.LAUNCH_BATCHES)


def _job(experiment: xm.Experiment) -> xm.Job:
    [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", "pass"])])
    return xm.Job(exe, fake.FakeExecutor(hold=True))


def test_async_loop_of_adds_is_one_submission_made_at_the_first_await(xcore_home: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XCORE_BATCH_MAX_AGE", "600")  # only the await may trigger it

    async def main() -> tuple[int, int]:
        async with xm.create_experiment("async loop") as experiment:
            job = _job(experiment)
            for i in range(60):
                experiment.add(job, args={"args": {"i": i}})
            before = len(_runs(xcore_home))
            deadline = time.monotonic() + 30
            while not _runs(xcore_home) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # any await that suspends hands the batch over
            return before, len(_runs(xcore_home))

    before, during = asyncio.run(main())
    assert (before, during) == (0, 1)
    assert len(_runs(xcore_home)) == 1


def test_sync_script_that_sleeps_gets_its_local_jobs_started_by_max_age(xcore_home: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XCORE_BATCH_MAX_AGE", "0.3")
    with xm.create_experiment("long script") as experiment:
        job = _job(experiment)
        for i in range(20):
            experiment.add(job, args={"args": {"i": i}})
        deadline = time.monotonic() + 30
        while not _runs(xcore_home) and time.monotonic() < deadline:
            time.sleep(0.05)  # the script does something long; its jobs must not wait for it
        assert len(_runs(xcore_home)) == 1
    assert len(_runs(xcore_home)) == 1


def _poll_runs(home: Path, count: int, secs: float) -> int:
    deadline = time.monotonic() + secs
    while len(_runs(home)) < count and time.monotonic() < deadline:
        time.sleep(0.02)  # no xcore call: nothing of the script asks for a submission
    return len(_runs(home))


def test_local_hands_its_first_committed_group_over_at_once_then_by_max_age(xcore_home: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``batch_first_max_age`` (xlocal.Local's: 0): a sweep's first committed jobs go to the
    runner before the ``with`` block ends, however long ``batch_max_age`` is; the next ones
    wait for their age (here longer than the test) or the block's end."""
    monkeypatch.delenv("XCORE_BATCH_MAX_AGE", raising=False)
    monkeypatch.setenv("XCORE_RECORD_GROUP", "16")
    monkeypatch.setattr(fake.FakeExecutor, "batch_max_age", 600.0)
    with xm.create_experiment("early") as experiment:
        job = _job(experiment)
        for i in range(16):
            experiment.add(job, args={"args": {"i": i}})
        assert _poll_runs(xcore_home, 1, 30) == 1  # handed over while the script runs
        for i in range(16, 32):
            experiment.add(job, args={"args": {"i": i}})
        assert _poll_runs(xcore_home, 2, 0.5) == 1  # the second batch waits for its age
    assert len(_runs(xcore_home)) == 2


def test_an_executor_without_batch_max_age_is_submitted_at_the_end_only(xcore_home: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch-only executor class (no ``batch_max_age``, as Slurm's): ``batch_first_max_age``
    alone does not hand anything over early; the ``with`` block's end submits one batch."""
    monkeypatch.delenv("XCORE_BATCH_MAX_AGE", raising=False)
    monkeypatch.setenv("XCORE_RECORD_GROUP", "16")
    monkeypatch.setattr(fake.FakeExecutor, "batch_max_age", None)
    with xm.create_experiment("batch only") as experiment:
        job = _job(experiment)
        for i in range(40):
            experiment.add(job, args={"args": {"i": i}})
        assert _poll_runs(xcore_home, 1, 1.0) == 0
    assert len(_runs(xcore_home)) == 1
