"""The last answer of each cluster to a status query, for a process that asks about the same
jobs again and again (``xcore watch``: 40,000 held Slurm tasks every few seconds).

When the scheduler's output is byte for byte what it was, and the handles asked about are the
very objects asked about last time, every state is what it was: the same state objects are
returned without parsing a line or matching a handle again, and the watcher, seeing the same
objects, does no work for those jobs either. An answer stops being reused once a state read
from it would change with the clock alone (a task not yet listed in its first minute).
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

import attrs

from xcore.plugin import JobState
from xhpc.handles import ClusterHandle


@attrs.define
class Answer:
    out: str  # the whole output of the query (markers, squeue and sacct, or qstat and qacct)
    handles: list[ClusterHandle]
    states: list[JobState | None]
    outage: str | None
    until: float  # the clock after which the same output may read otherwise


_last: dict[tuple[str, bool, str], Answer] = {}


def recall(key: tuple[str, bool, str], out: str, handles: Sequence[ClusterHandle],
           now: float) -> tuple[list[JobState | None], str | None] | None:
    """The states (and outage) read last time from this same output about these same handles."""
    answer = _last.get(key)
    if answer is None or now >= answer.until or answer.out != out or len(answer.handles) != len(handles) \
            or not all(map(operator.is_, answer.handles, handles)):
        return None
    return answer.states, answer.outage  # the same list: a caller sees that nothing moved


def remember(key: tuple[str, bool, str], out: str, handles: Sequence[ClusterHandle],
             states: list[JobState | None], outage: str | None, until: float) -> None:
    _last[key] = Answer(out, list(handles), states, outage, until)


@attrs.define
class Poll:
    """The last ``tracking.states`` call: its handles as grouped by cluster, each cluster's
    answer and the states returned, so the same handles answered alike cost no pass over them."""

    handles: list[ClusterHandle]
    failed: dict[int, JobState]  # index -> the state of a handle whose submission failed
    grouped: dict[tuple[str, bool, str], tuple[list[int], list[ClusterHandle]]]
    answered: dict[tuple[str, bool, str], list[JobState | None]]
    result: list[JobState]


_poll: list[Poll] = []  # at most one
_about: dict[tuple[str, bool, str], tuple[Sequence[ClusterHandle], Any]] = {}
T = TypeVar("T")


def about(key: tuple[str, bool, str], group: Sequence[ClusterHandle],
          work: Callable[[Sequence[ClusterHandle]], T]) -> T:
    """``work(group)`` (what a query of the cluster names: job ids, run directories), worked
    out once for the very list a watcher asks about every cycle."""
    known = _about.get(key)
    if known is not None and known[0] is group:
        return cast(T, known[1])
    found = work(group)
    _about[key] = (group, found)
    return found


def last_poll(handles: Sequence[ClusterHandle]) -> Poll | None:
    """The last poll, if it asked about these very handle objects, in this order."""
    if _poll and len(_poll[0].handles) == len(handles) and all(map(operator.is_, _poll[0].handles, handles)):
        return _poll[0]
    return None


def remember_poll(handles: Sequence[ClusterHandle], failed: dict[int, JobState],
                  grouped: dict[tuple[str, bool, str], tuple[list[int], list[ClusterHandle]]],
                  answered: dict[tuple[str, bool, str], list[JobState | None]], result: list[JobState]) -> None:
    _poll[:] = [Poll(list(handles), failed, grouped, answered, list(result))]


def clear() -> None:
    """Forget every answer (tests)."""
    _last.clear()
    _poll.clear()
    _about.clear()


@contextlib.contextmanager
def set_aside() -> Iterator[None]:
    """Inside: no answer recalled, and the ones kept before are back after (the baseline
    cycles ``bench/bench_watch.py`` alternates with a watcher's)."""
    saved, poll, named = dict(_last), list(_poll), dict(_about)
    clear()
    try:
        yield
    finally:
        clear()
        _last.update(saved)
        _poll[:] = poll
        _about.update(named)
