"""Waiting for local jobs: the wait learns that a run's jobs ended when its runner lets go
of it (done.fifo), not at the next poll tick, from any process, with any number of waiters.
And the serving runner a launcher hands its batches to."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import xcore as xm
import xlocal
from xcore.hooks.host import get_host
from xcore.model.status import Status
from xcore.runtime import tracking
from xlocal import processes

pytestmark = pytest.mark.usefixtures("xcore_home")  # the isolation the core's tests get from conftest


def _launch(command: list[str], units: int = 1) -> tuple[xm.Experiment, list]:
    with xm.create_experiment("wait") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), command[0], args=command[1:])])
        for _ in range(units):
            experiment.add(xm.Job(exe, xlocal.Local()))
    jobs = [j for u in experiment._store.work_units(experiment.experiment_id) for j in u.jobs]
    return experiment, [get_host().serializer.load(j.handle) for j in jobs]


def test_waiters_wake_when_the_runner_exits_not_at_their_timeout():
    _, handles = _launch(["/bin/sleep", "0.4"], units=2)
    woke: list[float] = []

    def waiter() -> None:
        started = time.monotonic()
        processes.wait_for_change(handles, 60)
        woke.append(time.monotonic() - started)

    threads = [threading.Thread(target=waiter) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(woke) == 4 and max(woke) < 20, woke  # woken by the runner's exit, not the 60 s timeout
    assert [s.status for s in processes.states(handles)] == [Status.COMPLETED] * 2


def test_a_gone_runner_wakes_the_wait_once_then_never_again():
    """A run seen without its runner may have just ended (wake at once); after that it can
    never signal, so the wait must sleep its timeout instead of spinning."""
    _, handles = _launch(["/bin/true"])
    deadline = time.monotonic() + 30
    while processes._runner_alive(Path(handles[0].run_dir)) and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    processes.wait_for_change(handles, 5)
    assert time.monotonic() - started < 2.5
    started = time.monotonic()
    processes.wait_for_change(handles, 0.3)
    assert time.monotonic() - started >= 0.25


def test_a_job_that_leaves_a_daemon_behind_does_not_hold_the_wait():
    """Jobs must not inherit the runner's end of done.fifo: a child a job leaves running would
    otherwise keep every waiter blocked until it exits."""
    _, handles = _launch(["/bin/sh", "-c", "sleep 8 >/dev/null 2>&1 & exit 0"])
    started = time.monotonic()
    processes.wait_for_change(handles, 30)
    assert time.monotonic() - started < 6
    assert processes.states(handles)[0].status is Status.COMPLETED


def test_wait_returns_soon_after_the_last_job_with_few_polls():
    """Polling alone (0.05 s growing to 0.25 s) reads the store about 12 times over a 2 s
    job; told by the runner, the wait polls 3 times (start, a progress poll, the end) and
    still returns at once."""
    experiment, _ = _launch(["/bin/sleep", "2"])
    store, host = experiment._store, get_host()
    polls = 0

    def fetch():
        nonlocal polls
        polls += 1
        return [j for u in store.work_units(experiment.experiment_id) for j in u.jobs]

    jobs = tracking.wait_for(fetch, store, host, timeout=60)
    returned = time.time()
    assert [j.status for j in jobs] == [Status.COMPLETED]
    ended = [j for u in store.work_units(experiment.experiment_id) for j in u.jobs][0].ended_at
    assert ended is not None and returned - ended < 1.5, (returned, ended)
    assert polls <= 5, f"{polls} polls for one 2 s job"


def _runner_pid(run_dir: str) -> int:
    """The pid of the runner serving a batch: it writes runner.json when it takes the batch,
    which may be a moment after the launch returned."""
    path, deadline = Path(run_dir, "runner.json"), time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return json.loads(path.read_text())["pid"]


def _events(run_dir: str) -> list[dict]:
    """The run's events so far (none yet: the runner acknowledges a batch before it opens its log)."""
    path = Path(run_dir, "events.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_one_runner_serves_every_batch_and_lets_go_of_each_when_it_ends():
    """Batches of one launcher go to one runner; a batch that ended reads so (lock free, waiters
    woken) while the runner still serves a later one."""
    _, first = _launch(["/bin/true"], units=2)
    _, second = _launch(["/bin/sleep", "60"])  # outlives any wait below: held would mean 60 s
    assert first[0].run_dir != second[0].run_dir
    pids = {_runner_pid(h.run_dir) for h in (first[0], second[0])}
    assert len(pids) == 1, "each batch got a runner of its own"
    started = time.monotonic()
    processes.wait_for_change(first, 30)
    assert time.monotonic() - started < 30, "the first batch was held until the runner exits"
    assert not processes._runner_alive(Path(first[0].run_dir))
    assert processes._runner_alive(Path(second[0].run_dir))
    assert [s.status for s in processes.states(first)] == [Status.COMPLETED] * 2
    processes.cancel(second)
    processes.wait_for_change(second, 30)
    assert processes.states(second)[0].status is Status.CANCELLED


def test_a_killed_serving_runner_is_replaced_and_no_job_runs_twice():
    _launch(["/bin/true"])
    assert processes._server is not None
    os.kill(processes._server[2].pid, signal.SIGKILL)
    processes._server[2].wait()
    _, handles = _launch(["/bin/true"], units=3)
    processes.wait_for_change(handles, 30)
    assert [s.status for s in processes.states(handles)] == [Status.COMPLETED] * 3
    starts = [e["i"] for e in _events(handles[0].run_dir) if e["e"] == "start"]
    assert sorted(starts) == [0, 1, 2]


def test_local_jobs_start_while_the_script_still_adds():
    """A sweep whose adds take a while: its first jobs run before the last add is made (the
    local executor submits its first jobs at once and later ones by age, to the one serving runner)."""
    with xm.create_experiment("overlap") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), "/bin/true")])
        for _ in range(8):
            experiment.add(xm.Job(exe, xlocal.Local()))
            time.sleep(0.15)
        last_add = time.time()
    jobs = [j for u in experiment._store.work_units(experiment.experiment_id) for j in u.jobs]
    handles = [get_host().serializer.load(j.handle) for j in jobs]
    assert len({h.run_dir for h in handles}) > 1
    first_start = min(e["t"] for h in handles for e in _events(h.run_dir) if e["e"] == "start")
    assert first_start < last_add - 0.3
    processes.wait_for_change(handles, 30)


def test_a_batch_the_serving_runner_cannot_read_fails_alone(tmp_path):
    """A batch withdrawn before the runner read it: its lock is let go (its jobs read FAILED),
    the reason is in its runner.log, and the same runner goes on serving the next batch."""
    _launch(["/bin/true"])
    server_pid = processes._server[2].pid
    run = tmp_path / "run"
    run.mkdir()
    lock = os.open(run / "runner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    os.mkfifo(run / "done.fifo", 0o600)
    done = os.open(run / "done.fifo", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert processes._hand_over(run, (lock, done))
    finally:
        os.close(lock)
        os.close(done)
    deadline = time.monotonic() + 30
    while processes._runner_alive(run) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not processes._runner_alive(run)
    assert "cannot run" in (run / "runner.log").read_text()
    _, handles = _launch(["/bin/true"])
    processes.wait_for_change(handles, 30)
    assert processes.states(handles)[0].status is Status.COMPLETED
    assert json.loads(Path(handles[0].run_dir, "runner.json").read_text())["pid"] == server_pid


def _launch_mixed(commands: list[list[str]]) -> list:
    with xm.create_experiment("mixed") as experiment:
        exes = experiment.package([xm.binary(xlocal.Local.Spec(), c[0], args=c[1:]) for c in commands])
        for exe in exes:
            experiment.add(xm.Job(exe, xlocal.Local()))
    jobs = [j for u in experiment._store.work_units(experiment.experiment_id) for j in u.jobs]
    return [get_host().serializer.load(j.handle) for j in jobs]


def test_waiting_for_part_of_a_run_is_not_held_until_the_run_ends(monkeypatch):
    """`xcore wait EXP/WU` for a job that ended while its run goes on: answered at the
    poll rate, not when the rest of the run ends."""
    monkeypatch.setenv("XCORE_BATCH_MAX_AGE", "60")  # one run for both, however slow the adds
    quick, slow = _launch_mixed([["/bin/true"], ["/bin/sleep", "4"]])
    assert quick.run_dir == slow.run_dir
    started = time.monotonic()
    processes.wait_for_change([quick], 30)
    assert time.monotonic() - started < 2
    processes.cancel([slow])


def test_the_wait_wakes_when_the_last_run_ends_not_the_first():
    """An earlier run's end would only cost a poll of every active job: the wait sleeps on."""
    _, first = _launch(["/bin/true"])
    time.sleep(0.05)
    _, second = _launch(["/bin/sleep", "1.5"])
    started = time.monotonic()
    processes.wait_for_change(first + second, 30)
    assert 1.0 < time.monotonic() - started < 20
    assert processes.states(second)[0].status is Status.COMPLETED


def test_runner_per_batch_is_on_only_for_a_true_value(monkeypatch) -> None:
    from xlocal import processes

    for value, expected in (("", False), ("0", False), ("1", True), ("yes", True)):
        monkeypatch.setenv("XLOCAL_RUNNER_PER_BATCH", value)
        assert processes._runner_per_batch() is expected, value
    monkeypatch.delenv("XLOCAL_RUNNER_PER_BATCH")
    assert processes._runner_per_batch() is False


def test_a_wait_for_the_still_active_jobs_of_a_run_lasts_until_the_run_ends(monkeypatch):
    """A launcher's wait passes only the jobs still active at its last poll. The run's other
    jobs ended, so the wait is not for part of the run: it must not wake every 0.25 s (each
    wake is a poll of every active job) but when the run ends."""
    monkeypatch.setenv("XCORE_BATCH_MAX_AGE", "60")  # one run for both, however slow the adds
    quick, slow = _launch_mixed([["/bin/true"], ["/bin/sleep", "1.5"]])
    assert quick.run_dir == slow.run_dir
    deadline = time.monotonic() + 30
    while processes.states([quick])[0].status.is_active and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    processes.wait_for_change([slow], 30)
    assert time.monotonic() - started > 0.6, "woken at the partial-wait rate, not when the run ended"
    assert processes.states([slow])[0].status is Status.COMPLETED


def test_event_log_is_read_incrementally_and_a_torn_last_line_later(tmp_path, monkeypatch):
    """Each poll parses only the lines written since the last one; a line still being written
    is left for the next read, whole."""
    run = tmp_path / "run"
    run.mkdir()
    log = run / "events.jsonl"
    start = json.dumps({"i": 0, "e": "start", "pid": 1, "t": 1.0}) + "\n"
    end = json.dumps({"i": 0, "e": "exit", "rc": 3, "t": 2.0, "error": None}) + "\n"
    log.write_text(start + end[:10])
    parsed: list[bytes] = []
    real_loads = json.loads
    monkeypatch.setattr(processes.json, "loads", lambda data: parsed.append(data) or real_loads(data))
    assert set(processes.read_events(run)[0]) == {"start"}
    with open(log, "a") as file:
        file.write(end[10:])
    assert processes.read_events(run)[0]["exit"]["rc"] == 3
    assert len(parsed) == 2, parsed  # each line parsed once, the torn one only when whole


def _context_switches(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("voluntary_ctxt_switches"))


def test_a_batch_waiting_for_the_runners_own_slots_does_not_wake_it(monkeypatch):
    """Every slot held by the runner's own jobs: their ends wake it, so a later batch waiting
    for a slot must not make it look again every few ms (as when another runner holds them)."""
    monkeypatch.setenv("XLOCAL_SLOTS", "2")
    _, busy = _launch(["/bin/sleep", "1.5"], units=2)
    _, waiting = _launch(["/bin/true"])
    runner = json.loads(Path(busy[0].run_dir, "runner.json").read_text())["pid"]
    deadline = time.monotonic() + 30
    while len([e for e in _events(busy[0].run_dir) if e["e"] == "start"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # the second batch handed over and found no slot
    before = _context_switches(runner)
    time.sleep(0.6)
    woken = _context_switches(runner) - before
    assert processes.states(waiting)[0].status is Status.PENDING
    assert woken <= 3, f"the runner woke {woken} times while its own jobs held every slot"
    processes.wait_for_change(busy + waiting, 30)
    assert [s.status for s in processes.states(busy + waiting)] == [Status.COMPLETED] * 3


def test_logs_are_opened_ahead_for_one_waiting_batch_only(monkeypatch):
    """The runner opens logs ahead (while its slots are busy) for the batch whose jobs start
    next only: batches queued behind it hold no descriptors each."""
    from xlocal.runner import LogOpener

    monkeypatch.setenv("XLOCAL_SLOTS", "1")
    _, busy = _launch(["/bin/sleep", "1.5"])
    queued = [h for _ in range(4) for h in _launch(["/bin/true"], units=LogOpener.AHEAD + 4)[1]]
    runner = json.loads(Path(busy[0].run_dir, "runner.json").read_text())["pid"]
    time.sleep(0.4)  # every batch handed over; all wait for the one slot
    logs = [os.readlink(f"/proc/{runner}/fd/{fd}") for fd in os.listdir(f"/proc/{runner}/fd")]
    opened = [path for path in logs if path.endswith(".log")]
    processes.wait_for_change(busy + queued, 30)
    assert [s.status for s in processes.states(busy + queued)] == [Status.COMPLETED] * len(busy + queued)
    assert 0 < len(opened) <= LogOpener.AHEAD, opened


def test_threads_reading_one_runs_events_at_once_each_see_every_event(tmp_path):
    """A wait and an output follower (threads of one process) read the same run's events
    while the runner appends: every reader ends up with every event, none skipped."""
    run = tmp_path / "run"
    run.mkdir()
    log = run / "events.jsonl"
    log.write_text("")
    total, done = 3000, threading.Event()

    def append() -> None:
        with open(log, "a") as file:
            for i in range(total):
                file.write(json.dumps({"i": i, "e": "start", "pid": i, "t": 0.0}) + "\n")
                file.flush()
        done.set()

    def read() -> None:
        while not done.is_set():
            processes.read_events(run)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for thread in readers:
        thread.start()
    append()
    for thread in readers:
        thread.join()
    assert len(processes.read_events(run)) == total
