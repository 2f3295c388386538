"""Why a local process job waits: every machine slot taken, or its launch's ``max_parallel``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import xcore as xm
import xlocal
from xcore.model.status import Status

pytestmark = pytest.mark.usefixtures("xcore_home")

HOLD = ("import os, sys, time\n"
        "deadline = time.time() + 300\n"
        "while not os.path.exists(sys.argv[1]) and time.time() < deadline: time.sleep(0.05)\n")


def _reason(unit: object, want: str) -> str:
    deadline = time.monotonic() + 60
    while True:
        status = unit.get_status()  # type: ignore[attr-defined]
        if status.status is Status.PENDING and status.message.endswith(want) or time.monotonic() > deadline:
            return f"{status.status.value} {status.message}"
        time.sleep(0.05)


@pytest.mark.parametrize(("slots", "max_parallel", "reason"), [
    ("2", None, "waiting for a slot (2 of 2 busy)"),
    ("8", 2, "waiting: 2 of this launch's max_parallel=2 are running"),
])
def test_a_waiting_job_says_what_it_waits_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slots: str,
                                              max_parallel: int | None, reason: str) -> None:
    monkeypatch.setenv("XLOCAL_SLOTS", slots)
    gate = tmp_path / "gate"
    try:
        with xm.create_experiment("wait") as experiment:
            [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", HOLD, str(gate)])])
            for _ in range(3):  # one launch (no .result() in between): max_parallel caps a launch
                experiment.add(xm.Job(exe, xlocal.Local(max_parallel=max_parallel)))
        assert _reason(experiment.work_units[3], reason) == f"PENDING python: {reason}"  # the unit names its job
    finally:
        gate.touch()
    experiment.wait_until_complete()
