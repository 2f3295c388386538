"""A poller that asks about the same tasks again and again (``xcore watch``) gets the same state
objects back without the scheduler's output being parsed again, as long as that output is the
same; any change to it, or the clock passing a task's first minute, is read afresh."""

from __future__ import annotations

import time

import pytest

from xhpc import answers, schedulers, tracking
from xhpc.handles import SlurmHandle
from xhpc.transport import Result

MARK = schedulers._SQUEUE_MARK


class _Scheduler:
    """A transport whose squeue + sacct output the test sets."""

    def __init__(self) -> None:
        self.out = ""

    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None) -> Result:
        return Result(0, self.out.encode(), b"")


@pytest.fixture
def cluster(monkeypatch) -> _Scheduler:
    answers.clear()
    scheduler = _Scheduler()
    monkeypatch.setattr(tracking, "_transport", lambda handle: scheduler)
    return scheduler


def _held(tasks: range) -> str:
    """squeue's line (without -r) for an array whose tasks ``tasks`` wait held in its own record."""
    return f"500|{tasks.start}-{tasks.stop - 1}|PENDING|JobHeldUser|N/A|500|\n"


def _handles(submitted_at: float) -> list[SlurmHandle]:
    return [SlurmHandle(cluster="c", job_id="500", task=task, index=task, run_dir="/runs/a",
                        submitted_at=submitted_at) for task in range(3)]


def _parses(monkeypatch) -> list[str]:
    parsed: list[str] = []
    parse = schedulers.SlurmScheduler.parse_states
    monkeypatch.setattr(schedulers.SlurmScheduler, "parse_states",
                        lambda self, out: parsed.append(out) or parse(self, out))
    return parsed


def test_the_same_output_about_the_same_handles_is_not_parsed_again(cluster, monkeypatch) -> None:
    handles, parsed = _handles(time.time() - 3600), _parses(monkeypatch)
    cluster.out = _held(range(3)) + MARK + "\n"
    first = tracking.states(handles)
    second = tracking.states(handles)
    assert [s.message for s in second] == ["pending: JobHeldUser"] * 3
    assert len(parsed) == 1 and all(a is b for a, b in zip(first, second, strict=True))
    tracking.states(_handles(time.time() - 3600))  # other handle objects (another process's): read afresh
    assert len(parsed) == 2


def test_a_changed_output_is_read_afresh(cluster, monkeypatch) -> None:
    handles, parsed = _handles(time.time() - 3600), _parses(monkeypatch)
    cluster.out = _held(range(3)) + MARK + "\n"
    tracking.states(handles)
    cluster.out = _held(range(2)) + MARK + "\n"  # task 2 cancelled outside xcore: no longer listed
    states = tracking.states(handles)
    assert len(parsed) == 2
    assert [s.status.value for s in states] == ["PENDING", "PENDING", "CANCELLED"]
    assert states[2].message == "cancelled before it started"  # left its array's record without starting
    cluster.out = MARK + "\n"  # the whole array gone from squeue and sacct: nothing says how it ended
    assert [s.message for s in tracking.states(handles)] == [
        f"lost: slurm job 500 task {t} is no longer known to the scheduler or its accounting" for t in range(3)]


def test_a_task_in_its_first_minute_is_read_again_once_the_minute_passed(cluster, monkeypatch) -> None:
    now = time.time()
    handles, parsed = _handles(now - 30), _parses(monkeypatch)
    cluster.out = MARK + "\n"  # not listed yet: pending for its first minute, lost after
    assert {s.message for s in tracking.states(handles)} == {"pending: submitted"}
    monkeypatch.setattr(time, "time", lambda: now + 31)
    states = tracking.states(handles)
    assert len(parsed) == 2 and {s.status.value for s in states} == {"FAILED"}


def test_the_same_handles_answered_alike_are_not_grouped_or_matched_again(cluster, monkeypatch) -> None:
    handles = _handles(time.time() - 3600)
    cluster.out = _held(range(3)) + MARK + "\n"
    first = tracking.states(handles)
    grouped: list[object] = []
    monkeypatch.setattr(tracking, "_scheduler_name", lambda handle: grouped.append(handle) or "slurm")
    again = tracking.states(handles)
    assert grouped == [] and again == first and all(a is b for a, b in zip(first, again, strict=True))
    cluster.out = _held(range(2)) + MARK + "\n"  # one task gone: that cluster's states read again
    assert [s.status.value for s in tracking.states(handles)] == ["PENDING", "PENDING", "CANCELLED"]


def test_a_cluster_out_of_reach_leaves_its_tasks_unanswered_beside_one_answered_as_before(cluster, monkeypatch) -> None:
    from xcore.plugin import BackendUnavailableError
    from xhpc.transport import ClusterConnectionError

    near = _handles(time.time() - 3600)
    far = [SlurmHandle(cluster="far", job_id="700", task=0, index=0, run_dir="/runs/b", submitted_at=time.time())]
    cluster.out = _held(range(3)) + MARK + "\n"
    tracking.states(near + far)
    both = near + far

    def unreachable(handle):
        if handle.cluster == "far":
            raise ClusterConnectionError("link down", retryable=True)
        return cluster

    monkeypatch.setattr(tracking, "_transport", unreachable)
    with pytest.raises(BackendUnavailableError) as raised:
        tracking.states(both)
    assert [s.message if s else None for s in raised.value.states] == ["pending: JobHeldUser"] * 3 + [None]
