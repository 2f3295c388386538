"""The batching rule (``xcore.runtime.launcher``): submissions follow what the script does, not timing."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

import xcore as xm
import xlocal


def _runs(home: Path) -> list[Path]:
    return sorted((home / "plugins" / "xlocal" / "runs").glob("*/batch.json"))


def _job(experiment: xm.Experiment) -> xm.Job:
    [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", "pass"])])
    return xm.Job(exe, xlocal.Local())


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
