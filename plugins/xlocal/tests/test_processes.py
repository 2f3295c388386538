"""Status of local processes read from the runner's files, including its races."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from xcore.status import Status
from xlocal import processes
from xlocal.handles import ProcessHandle


def _run_dir(tmp_path: Path, runner_pid: int) -> Path:
    run = tmp_path / "run"
    (run / "jobs").mkdir(parents=True)
    (run / "batch.json").write_text("{}")
    (run / "runner.json").write_text(json.dumps({"pid": runner_pid, "t": time.time()}))
    return run


def test_last_job_finished_as_runner_exited_reads_completed_not_lost(tmp_path, monkeypatch):
    """The events are read, the runner then logs the last exit and exits: the reader must re-read."""
    run = _run_dir(tmp_path, runner_pid=os.getpid())
    events = run / "events.jsonl"
    events.write_text(json.dumps({"i": 0, "e": "exit", "rc": 0, "t": time.time()}) + "\n")
    real_read = processes.read_events
    calls = []

    def read_then_finish(run_dir):
        result = real_read(run_dir)
        if not calls:  # right after the first read, the runner finishes job 1 and exits
            with open(events, "a") as log:
                log.write(json.dumps({"i": 1, "e": "start", "pid": 1, "t": time.time()}) + "\n")
                log.write(json.dumps({"i": 1, "e": "exit", "rc": 0, "t": time.time()}) + "\n")
            (run / "runner.json").write_text(json.dumps({"pid": 2**22 + 7, "t": 0}))
        calls.append(1)
        return result

    monkeypatch.setattr(processes, "read_events", read_then_finish)
    handles = [ProcessHandle(str(run), i, log_path=str(tmp_path / f"{i}.log")) for i in (0, 1)]
    assert [s.status for s in processes.states(handles)] == [Status.COMPLETED, Status.COMPLETED]
    assert len(calls) == 2, "one re-read after seeing the runner gone, not one per job"


def test_runner_gone_without_starting_the_job_reads_failed(tmp_path):
    run = _run_dir(tmp_path, runner_pid=2**22 + 7)
    os.utime(run / "batch.json", (time.time() - 60, time.time() - 60))
    [state] = processes.states([ProcessHandle(str(run), 0, log_path=str(tmp_path / "0.log"))])
    assert state.status is Status.FAILED and "exited before starting" in state.message
