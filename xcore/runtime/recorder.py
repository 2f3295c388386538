"""Group commit of ``experiment.add``: the records of many adds share one store transaction.

An add is recorded durably (its unit, jobs, first events and tracker links, all or nothing)
as in XManager, where ``add`` only promises a launch: when its future resolves
(``.result()``, ``await``), when the ``with`` block ends, and always before any of its
jobs is handed to a backend, because a unit's jobs reach the launcher's queue only once
their group is committed. Between those points a group is committed once it holds
``XCORE_RECORD_GROUP`` adds (default 256) or its oldest add is ``XCORE_RECORD_MAX_AGE``
seconds old (default 0.05), whichever comes first. A small background thread commits groups
by age, and full ones too for a store that waits on a server (``writes_in_background``), while
the script goes on adding; at most ``MAX_WAITING`` full groups wait for the thread, beyond
which an add waits for it. For SQLite the add that fills a group commits it itself: the write
is CPU work of this process, and done by another thread it only competed with the script for
the GIL (each hand-over wakes the other thread: a 10,000-unit sweep cost 15% more CPU and wall
time, issue 14). Either way groups are committed one at a time, in add order, and a long loop
of adds holds a bounded amount of work in memory.

One commit per few hundred adds instead of one per add is what brings an add under
0.1 ms (issue 14). What a killed launcher leaves is unchanged in kind: a group is in the
store whole or not at all, and nothing that is not in the store was submitted anywhere.
A group that the store refuses fails loudly: its futures fail with the store's error, and
so do those of every add queued after it (nothing after a refused group is recorded, so
the store keeps an unbroken prefix of the adds); the next add (which is refused too) or
wait raises the error, and the experiment ends LAUNCH_FAILED.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from xcore.model import datamodel
from xcore.settings import env_int, env_number
from xcore.store import MetadataStore
from xcore.store.records import UnitWrite


def group_size() -> int:
    return env_int("XCORE_RECORD_GROUP", 256, minimum=1)


def group_max_age() -> float:
    return env_number("XCORE_RECORD_MAX_AGE", 0.05)


MAX_WAITING = 2
"""Full groups that may wait for the background thread's commit before an add waits too."""


@datamodel.define(slots=True)
class PendingAdd:
    """One add waiting for its group's commit: what to write, and what the launcher needs to
    queue its jobs once written (``jobs``: one entry per job of ``write``, and the unit's
    ``ticket``; both opaque here)."""

    write: UnitWrite
    jobs: list[Any]
    ticket: Any


class Recorder:
    def __init__(
        self, store: MetadataStore, lease_id: Callable[[], int | None],
        on_recorded: Callable[[Sequence[PendingAdd], list[list[int]]], None],
        on_failure: Callable[[Sequence[PendingAdd], BaseException], None],
    ) -> None:
        self._store = store
        self._lease_id = lease_id
        self._on_recorded = on_recorded  # hands the jobs to the launcher
        self._on_failure = on_failure  # fails the group's futures
        self._pending: list[PendingAdd] = []  # the group being filled
        self._full: deque[list[PendingAdd]] = deque()  # full groups waiting for their commit, oldest first
        self._lock = threading.Lock()  # guards _pending, _full, _oldest, _closed, _unreported, _idle, _blocked
        self._cond = threading.Condition(self._lock)  # `with self._lock` where no wait is needed: no Python frame
        self._write_lock = threading.Lock()  # one group written at a time; taken before _cond, never inside it
        self._oldest = 0.0
        # Waking a thread costs both threads the GIL: an add notifies the background thread only
        # when it waits for a first add (not in a timed wait), and a flush only adds held by
        # back-pressure (a full group of a store that writes in the background wakes it too).
        self._idle = False
        self._blocked = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._unreported: BaseException | None = None  # a background commit's error, raised by the next add
        self._size = group_size()
        self._inline = not store.writes_in_background  # full groups committed by the add that fills them
        self._max_age = group_max_age()
        self.commits = 0  # groups committed (tests and benchmarks read it)

    def add(self, pending: PendingAdd) -> None:
        """Queue one add's records; a full group goes to the background thread, or is committed
        here (``writes_in_background`` False). Raises the store's error if a group committed
        since the last add or wait failed (this add, queued after the refused group, is refused
        with it), or if the group this add filled was refused (this add with it)."""
        with self._lock:
            while len(self._full) >= MAX_WAITING and self._unreported is None and not self._closed:
                self._blocked += 1
                try:
                    self._cond.wait()  # back-pressure: the thread is that far behind
                finally:
                    self._blocked -= 1
            if self._unreported is not None:
                error, self._unreported = self._unreported, None
            elif self._closed:
                raise RuntimeError("The experiment is closed; create a new one to add work units.")
            else:
                error = None
                self._pending.append(pending)
                count = len(self._pending)
                if count == 1:
                    self._oldest = time.monotonic()
                    if self._thread is None:
                        self._thread = threading.Thread(target=self._run, name="xcore-recorder", daemon=True)
                        self._thread.start()
                    elif self._idle:  # else its timed wait ends by itself and looks again
                        self._cond.notify_all()
                if count >= self._size:
                    self._full.append(self._pending)
                    self._pending = []
                    if not self._inline:
                        self._cond.notify_all()
        if error is not None:
            error.add_note(f"xcore: work unit {pending.write.work_unit_id}, added after it, was not recorded either.")
            self._on_failure([pending], error)
            raise error
        if self._inline and self._full:
            self.flush()  # the full group (and any older one), on this thread, in add order

    def flush(self) -> None:
        """Commit every add queued so far (in this thread), then hand their jobs to the launcher."""
        with self._write_lock:
            with self._cond:
                groups = list(self._full)
                if self._pending:
                    groups.append(self._pending)
                self._full.clear()
                self._pending = []
                if self._blocked or not self._inline:  # inline, only adds held by back-pressure wait on it
                    self._cond.notify_all()
            for index, group in enumerate(groups):
                self._commit(group, groups[index + 1:])
        self._raise_unreported()

    def close(self) -> None:
        """Commit what is queued and stop the background thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        try:
            self.flush()
        finally:
            if self._thread is not None:
                self._thread.join()

    def _commit(self, group: list[PendingAdd], later: Sequence[list[PendingAdd]] = (),
                background: bool = False) -> None:
        """Write one group (the write lock held). If the store refuses it, fail it with every
        add queued after it (``later``, taken by a flush, and what is still queued)."""
        try:
            ids = self._store.record_adds([p.write for p in group], lease_id=self._lease_id())
        except BaseException as exc:  # also Ctrl-C mid-commit: the transaction rolled back, nothing is recorded
            with self._cond:
                refused = group + [p for g in later for p in g] + [p for g in self._full for p in g] + self._pending
                self._full.clear()
                self._pending = []
                if background:
                    self._unreported = exc
                self._cond.notify_all()
            units = [p.write.work_unit_id for p in refused]
            if isinstance(exc, Exception):
                exc.add_note(f"xcore: work units {_ranges(units)} were not recorded (nothing of them was launched).")
            self._on_failure(refused, exc)
            raise
        self.commits += 1
        try:
            self._on_recorded(group, ids)
        except Exception as exc:
            if not background:
                raise
            with self._cond:  # e.g. the launcher was closed: the next add or wait says so
                self._unreported = exc

    def _raise_unreported(self) -> None:
        if self._unreported is not None:
            with self._cond:
                error, self._unreported = self._unreported, None
            if error is not None:
                raise error

    def _run(self) -> None:
        recent = True  # adds came lately: more are likely, so look again in a while rather than be woken
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return  # close() commits the rest
                    if self._full:
                        break
                    if self._pending:
                        wait = self._oldest + self._max_age - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                        recent = True
                    elif recent:  # e.g. the adding thread committed the group: a new one starts soon
                        recent = False
                        self._cond.wait(self._max_age)
                    else:
                        self._idle = True  # no add for a while: the next one wakes it
                        try:
                            self._cond.wait()
                        finally:
                            self._idle = False
                        recent = True
            with self._write_lock:
                with self._cond:  # the oldest group first (a flush may have taken them all meanwhile)
                    if self._full:
                        group = self._full.popleft()
                    else:
                        group, self._pending = self._pending, []
                    self._cond.notify_all()
                if not group:
                    continue
                with contextlib.suppress(Exception):  # its futures failed; the next add or wait raises it
                    self._commit(group, background=True)


def _ranges(ids: Sequence[int]) -> str:
    """``1-3, 7`` for [1, 2, 3, 7]."""
    parts: list[str] = []
    start = prev = None
    for i in sorted(ids):
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)

