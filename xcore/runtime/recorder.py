"""Group commit of ``experiment.add``: the records of many adds share one store transaction.

An add is recorded durably (its unit, jobs, first events and tracker links, all or nothing)
as in XManager, where ``add`` only promises a launch: when its future resolves
(``.result()``, ``await``), when the ``with`` block ends, and always before any of its
jobs is handed to a backend, because a unit's jobs reach the launcher's queue only once
their group is committed. Between those points a group is committed when it holds
``XCORE_RECORD_GROUP`` adds (default 256) or its oldest add is ``XCORE_RECORD_MAX_AGE``
seconds old (default 0.05, by a small background thread), whichever comes first.

One commit per few hundred adds instead of one per add is what brings an add under
0.1 ms (issue 14). What a killed launcher leaves is unchanged in kind: a group is in the
store whole or not at all, and nothing that is not in the store was submitted anywhere.
A group that the store refuses fails loudly: the add (or wait) that wrote it raises the
store's error, the group's futures fail with it, and the experiment ends LAUNCH_FAILED.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from xcore.settings import env_int, env_number
from xcore.store import MetadataStore
from xcore.store.records import UnitWrite


def group_size() -> int:
    return env_int("XCORE_RECORD_GROUP", 256, minimum=1)


def group_max_age() -> float:
    return env_number("XCORE_RECORD_MAX_AGE", 0.05)


@attrs.define(slots=True)
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
        self._pending: list[PendingAdd] = []
        self._cond = threading.Condition()  # guards _pending, _oldest, _closed
        self._write_lock = threading.Lock()  # one group written at a time, in add order
        self._oldest = 0.0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._unreported: BaseException | None = None  # a background commit's error, raised by the next add
        self._size = group_size()
        self._max_age = group_max_age()
        self.commits = 0  # groups committed (tests and benchmarks read it)

    def add(self, pending: PendingAdd) -> None:
        """Queue one add's records; commit the group here if it is full. Raises the store's
        error if this group, or one committed in the background since the last add, failed."""
        if self._unreported is not None:
            self._raise_unreported()
        with self._cond:
            if self._closed:
                raise RuntimeError("The experiment is closed; create a new one to add work units.")
            self._pending.append(pending)
            count = len(self._pending)
            if count == 1:
                self._oldest = time.monotonic()
                if self._thread is None and not self._closed:
                    self._thread = threading.Thread(target=self._run, name="xcore-recorder", daemon=True)
                    self._thread.start()
                self._cond.notify()
        if count >= self._size:
            self.flush()

    def flush(self) -> None:
        """Commit every add queued so far, then hand their jobs to the launcher."""
        with self._write_lock:
            with self._cond:
                group, self._pending = self._pending, []
            if group:
                self._commit(group)
        self._raise_unreported()

    def close(self) -> None:
        """Commit what is queued and stop the background thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        try:
            self.flush()
        finally:
            if self._thread is not None:
                self._thread.join()

    def _commit(self, group: Sequence[PendingAdd]) -> None:
        try:
            ids = self._store.record_adds([p.write for p in group], lease_id=self._lease_id())
        except BaseException as exc:  # also Ctrl-C mid-commit: the transaction rolled back, nothing is recorded
            units = [p.write.work_unit_id for p in group]
            if isinstance(exc, Exception):
                exc.add_note(f"xcore: work units {_ranges(units)} were not recorded (nothing of them was launched).")
            self._on_failure(group, exc)
            raise
        self.commits += 1
        self._on_recorded(group, ids)

    def _raise_unreported(self) -> None:
        if self._unreported is not None:
            error, self._unreported = self._unreported, None
            raise error

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    if self._pending:
                        wait = self._oldest + self._max_age - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
            try:
                self.flush()
            except Exception as exc:  # already failed the group's futures; the next add raises it
                self._unreported = exc


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

