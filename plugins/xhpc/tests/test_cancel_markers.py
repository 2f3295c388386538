"""Cancelling a sweep leaves one marker per range of its tasks, not one file per task (issue 31:
a 100,000-task sweep created 100,000 files, and every status query after listed them), and a
status query reads such a range back as every task in it cancelled. The cluster's shell runs
for real here; only the scheduler's commands are stubs that record their arguments."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from xcore.plugin import Status
from xhpc import tracking
from xhpc.handles import GridEngineHandle
from xhpc.transport import Result

N = 1000


class _LocalShell:
    """Runs the command in bash with the stub scheduler commands first on PATH."""

    def __init__(self, stubs: Path) -> None:
        self.env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"}

    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None) -> Result:
        done = subprocess.run(["bash", "-c", command], input=stdin, capture_output=True, env=self.env,
                              timeout=60, check=False)
        return Result(done.returncode, done.stdout, done.stderr)


def _stub(stubs: Path, name: str, calls: Path) -> None:
    script = stubs / name
    script.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n')
    script.chmod(0o700)


def test_a_cancelled_sweep_is_one_marker_read_back_as_every_task(tmp_path, monkeypatch) -> None:
    run_dir, stubs, calls = tmp_path / "run", tmp_path / "bin", tmp_path / "calls"
    (run_dir / "cancelled").mkdir(parents=True)
    stubs.mkdir()
    for name in ("qdel", "qstat", "qacct"):  # the scheduler lists no task: they never ran
        _stub(stubs, name, calls)
    monkeypatch.setattr(tracking, "_transport", lambda handle: _LocalShell(stubs))
    old = time.time() - 3600  # old enough that a task the scheduler does not list would read lost
    handles = [GridEngineHandle("c", "4242", i + 1, i, str(run_dir), submitted_at=old) for i in range(N)]
    tracking.cancel(handles)
    assert sorted(p.name for p in (run_dir / "cancelled").iterdir()) == [f"0-{N - 1}"]
    assert [line for line in calls.read_text().splitlines() if line.startswith("qdel")] == [f"qdel 4242 -t 1-{N}"]
    states = tracking.states(handles)
    assert {(s.status, s.message) for s in states} == {(Status.CANCELLED, "cancelled before it started")}


def test_markers_of_single_tasks_and_of_ranges_read_back_alike(tmp_path, monkeypatch) -> None:
    run_dir, stubs, calls = tmp_path / "run", tmp_path / "bin", tmp_path / "calls"
    (run_dir / "cancelled").mkdir(parents=True)
    stubs.mkdir()
    for name in ("qstat", "qacct"):
        _stub(stubs, name, calls)
    for name in ("3", "5-7", "x-1", "9-"):  # one task (what earlier versions wrote), a range, two malformed
        (run_dir / "cancelled" / name).touch()
    monkeypatch.setattr(tracking, "_transport", lambda handle: _LocalShell(stubs))
    handles = [GridEngineHandle("c", "4243", i + 1, i, str(run_dir), submitted_at=time.time()) for i in range(10)]
    cancelled = [i for i, s in enumerate(tracking.states(handles)) if s.status is Status.CANCELLED]
    assert cancelled == [3, 5, 6, 7]
