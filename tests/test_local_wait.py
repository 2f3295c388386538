"""Waiting for local jobs: the wait learns that a runner's jobs ended when its runner exits
(done.fifo), not at the next poll tick, from any process, with any number of waiters."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import xcore as xm
import xlocal
from xcore.hooks.host import get_host
from xcore.runtime import tracking
from xcore.status import Status
from xlocal import processes


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
    job; told by the runner, the wait polls about 7 times and still returns at once."""
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
    assert polls <= 8, f"{polls} polls for one 2 s job"
