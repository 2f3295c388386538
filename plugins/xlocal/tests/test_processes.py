"""Status of local processes read from the runner's files, including its races."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from xcore.model.status import Status
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


def _run_batch(tmp_path: Path, jobs: list[list[str]], slots: int = 1) -> tuple[Path, list[Path]]:
    """The runner alone (as a launcher starts it for one batch) on ``jobs``; returns when it exited."""
    import fcntl
    import subprocess

    run = tmp_path / "run"
    (run / "jobs").mkdir(parents=True, mode=0o700)
    logs = [tmp_path / "logs" / f"{i}-job.log" for i in range(len(jobs))]
    logs[0].parent.mkdir(mode=0o700)
    batch = {"cwd": str(tmp_path), "base_env": dict(os.environ), "slots": slots, "max_parallel": None,
             "slots_dir": str(tmp_path / "slots"),
             "jobs": [{"argv": argv, "env": {}, "cwd": str(tmp_path), "log_path": str(log), "job_id": i}
                      for i, (argv, log) in enumerate(zip(jobs, logs, strict=True))]}
    (run / "batch.json").write_text(json.dumps(batch))
    lock = os.open(run / "runner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.mkfifo(run / "done.fifo", 0o600)
    done = os.open(run / "done.fifo", os.O_RDWR)
    try:
        subprocess.run([sys.executable, "-P", processes._RUNNER, str(run), str(lock), str(done)],
                       pass_fds=(lock, done), check=True, timeout=60)
    finally:
        os.close(lock)
        os.close(done)
    return run, logs


def test_logs_opened_ahead_hold_exactly_each_jobs_output_and_nothing_leaks(tmp_path):
    """More jobs than slots: the runner opens the next jobs' logs ahead of their start. Each
    log still holds exactly its job's output (nothing for a silent job, the reason for one
    that cannot start), is private, and no job inherits another's log or the runner's files."""
    show_fds = "import os, sys; print(sys.argv[1], sorted(os.listdir('/proc/self/fd')))"
    jobs: list[list[str]] = []
    for i in range(12):
        if i % 4 == 1:
            jobs.append(["/bin/true"])
        elif i == 6:
            jobs.append([str(tmp_path / "no-such-program")])
        else:
            jobs.append([sys.executable, "-c", show_fds, f"job {i} \u00e9 $x"])
    run, logs = _run_batch(tmp_path, jobs)
    events = processes.read_events(run)
    for i, log in enumerate(logs):
        text = log.read_text() if log.exists() else ""
        if i % 4 == 1:
            assert text == "" and events[i]["exit"]["rc"] == 0
        elif i == 6:
            assert "cannot start" in text and events[i]["exit"]["rc"] == 127
        else:
            assert text == f"job {i} \u00e9 $x ['0', '1', '2', '3']\n", (i, text)  # 3: listdir's own
            assert events[i]["exit"]["rc"] == 0
        if log.exists():
            assert log.stat().st_mode & 0o777 == 0o600


def test_the_next_jobs_logs_are_opened_while_a_job_runs(tmp_path):
    """With one slot busy, the runner has the next jobs' logs ready (created) before they start."""
    import threading

    seen: list[bool] = []
    probe_log = tmp_path / "logs" / "3-job.log"

    def probe() -> None:
        deadline = time.monotonic() + 30
        while not probe_log.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        events = processes.read_events(tmp_path / "run")
        seen.append(probe_log.exists() and 3 not in events and "exit" not in events.get(0, {}))

    thread = threading.Thread(target=probe)
    thread.start()
    _run_batch(tmp_path, [["/bin/sleep", "1"]] + [["/bin/true"]] * 4)
    thread.join()
    assert seen == [True], "job 3's log was not opened while job 0 ran"


def test_the_runner_starts_without_the_modules_that_slow_its_start(tmp_path):
    """The runner starts from its command line (cached bytecode, no site) with only built-in
    modules: json, socket, re and contextlib cost a launch's first job ~20 ms of start-up."""
    import importlib.util
    import subprocess

    command = processes.runner_command()
    assert command[:4] == [sys.executable, "-S", "-P", "-c"] and command[5] == processes._RUNNER
    probe = command[4].replace("namespace['main'](sys.argv[2:])",
                               "print(namespace['__file__']); print(sorted(sys.modules))")
    assert probe != command[4]
    # Loaded by path: a user's PYTHONPATH with a runner.py of its own changes nothing.
    (tmp_path / "runner.py").write_text("raise SystemExit('not this one')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # set in some shells; the runner's bytecode is then never cached
    out = subprocess.run([*command[:4], probe, command[5]], capture_output=True, text=True, check=True, env=env).stdout
    where, modules = out.splitlines()
    assert where == processes._RUNNER
    assert os.path.exists(importlib.util.cache_from_source(processes._RUNNER))  # its bytecode, compiled once
    loaded = set(eval(modules))  # noqa: S307  our own child's repr of a list of names
    assert not loaded & {"json", "socket", "re", "contextlib", "site", "xcore", "xlocal", "runner"}


def test_the_runners_json_reads_and_writes_as_json_does():
    """Its codec (json's C half, without the json package) writes what json.dumps writes and
    reads it back; what is not JSON is refused with a ValueError."""
    import pytest

    from xlocal import runner

    values = [{"argv": ["a b", "$x", "'q\"", "\n", "é☃😀", ""], "env": {"K": "v"}, "n": None, "t": 1.25},
              [1, -2, 10**20, 0.1, True, False, None], {"nan": float("-inf")}, {}, [], "s", 3]
    for value in values:
        text = runner.json_dumps(value)
        assert text == json.dumps(value)
        assert runner.json_dumps(runner.json_loads(text.encode())) == text
    for bad in (b"", b"{", b"{} x", b"nul", b"\xff"):
        with pytest.raises(ValueError):
            runner.json_loads(bad)
    with pytest.raises(TypeError, match="not JSON serializable"):
        runner.json_dumps({"a": object()})


def test_event_lines_formatted_directly_are_what_json_writes(tmp_path):
    """The runner formats its per-job start and exit lines itself (no encoder per event):
    the text must be exactly what ``EventLog.write`` (json.dumps) gives, for any value."""
    from xlocal.runner import EventLog

    direct, generic = EventLog(str(tmp_path / "direct")), EventLog(str(tmp_path / "generic"))
    for index, pid, returncode, when in [(0, 1, 0, 1.0), (17, 4194304, -9, 1763885000.123456),
                                         (123456, 77, 255, 1e-7), (5, 2, 1, 1763885000.0)]:
        direct.started(index, pid, when)
        generic.write(i=index, e="start", pid=pid, t=when)
        direct.ended(index, returncode, when)
        generic.write(i=index, e="exit", rc=returncode, t=when, error=None)
    direct.close()
    generic.close()
    text = (tmp_path / "direct").read_text()
    assert text == (tmp_path / "generic").read_text()
    assert [json.loads(line)["t"] for line in text.splitlines()][1] == 1.0


def test_events_are_read_in_one_parse_and_a_broken_line_costs_only_itself(tmp_path, monkeypatch):
    """Whole lines are parsed as one JSON array; if one of them is broken, every other line
    is still read (line by line)."""
    run = tmp_path / "run"
    run.mkdir()
    lines = [json.dumps({"i": i, "e": e, "t": float(i)}) for i in range(3) for e in ("start", "exit")]
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    parsed: list[bytes] = []
    real_loads = json.loads
    monkeypatch.setattr(processes.json, "loads", lambda data: parsed.append(data) or real_loads(data))
    events = processes.read_events(run)
    assert {i: sorted(e) for i, e in events.items()} == {i: ["exit", "start"] for i in range(3)}
    assert len(parsed) == 1

    other = tmp_path / "other"
    other.mkdir()
    (other / "events.jsonl").write_text("\n".join([lines[0], '{"i": 1, "e": "sta', "7", *lines[2:]]) + "\n")
    events = processes.read_events(other)
    assert {i: sorted(e) for i, e in events.items()} == {0: ["start"], 1: ["exit", "start"], 2: ["exit", "start"]}
