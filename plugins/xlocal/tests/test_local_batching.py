"""``xlocal.Local``'s place in the batching rule (``xcore.runtime.launcher``; the rule itself is
checked on the fake backend in tests/test_batching.py, with these class attributes): a sweep's
first committed jobs reach the runner at once, the next ones by age."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import xcore as xm
import xlocal


def _runs(home: Path) -> list[Path]:
    return sorted((home / "plugins" / "xlocal" / "runs").glob("*/batch.json"))


def _poll_runs(home: Path, count: int, secs: float) -> int:
    deadline = time.monotonic() + secs
    while len(_runs(home)) < count and time.monotonic() < deadline:
        time.sleep(0.02)  # no xcore call: nothing of the script asks for a submission
    return len(_runs(home))


def test_local_batches_early_as_the_core_tests_assume():
    """tests/test_batching.py gives the fake executor these values (its LOCAL_LIKE)."""
    assert (xlocal.Local.batch_first_max_age, xlocal.Local.batch_max_age) == (0.0, 0.05)


def test_local_hands_its_first_committed_group_over_at_once_then_by_max_age(xcore_home: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``batch_first_max_age`` (xlocal.Local: 0): a sweep's first committed jobs go to the
    runner before the ``with`` block ends, however long ``batch_max_age`` is; the next ones
    wait for their age (here longer than the test) or the block's end."""
    monkeypatch.delenv("XCORE_BATCH_MAX_AGE", raising=False)
    monkeypatch.setenv("XCORE_RECORD_GROUP", "16")
    monkeypatch.setattr(xlocal.Local, "batch_max_age", 600.0)
    with xm.create_experiment("early") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", "pass"])])
        job = xm.Job(exe, xlocal.Local())
        for i in range(16):
            experiment.add(job, args={"args": {"i": i}})
        assert _poll_runs(xcore_home, 1, 30) == 1  # handed over while the script runs
        for i in range(16, 32):
            experiment.add(job, args={"args": {"i": i}})
        assert _poll_runs(xcore_home, 2, 0.5) == 1  # the second batch waits for its age
    assert len(_runs(xcore_home)) == 2
