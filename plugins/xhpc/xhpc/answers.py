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
from collections.abc import Iterator, Sequence

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
    return list(answer.states), answer.outage


def remember(key: tuple[str, bool, str], out: str, handles: Sequence[ClusterHandle],
             states: list[JobState | None], outage: str | None, until: float) -> None:
    _last[key] = Answer(out, list(handles), list(states), outage, until)


def clear() -> None:
    """Forget every answer (tests)."""
    _last.clear()


@contextlib.contextmanager
def set_aside() -> Iterator[None]:
    """Inside: no answer recalled, and the ones kept before are back after (the baseline
    cycles ``bench/bench_watch.py`` alternates with a watcher's)."""
    saved = dict(_last)
    _last.clear()
    try:
        yield
    finally:
        _last.clear()
        _last.update(saved)
