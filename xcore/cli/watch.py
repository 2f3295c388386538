"""``xcore watch``: a long-running observer for a lab to run in tmux or as a service.

Each cycle it reads the active jobs of every experiment with active units (one store query),
asks their backends (``refresh_jobs``: one query per handle kind, so one per cluster or API),
records what changed and runs the observers' duties (``xcore.runtime.observers``): a retry
the backend cannot drive is relaunched here even when no one else looks, and notifications
no status change reveals (a unit waiting too long, a delivery due for another try) go out. Several watchers
(and ``xcore wait``, ``show``, the dashboard) may run at once: every duty claims its work in
the store. SIGINT or SIGTERM ends it after the cycle under way.
"""

from __future__ import annotations

import argparse
import operator
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from xcore.errors import XcoreError
from xcore.workspace import current

if TYPE_CHECKING:
    from xcore.store import MetadataStore
    from xcore.store.records import JobRecord

EXIT_OK = 0


def watch(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise XcoreError(f"--interval must be a number of seconds > 0, got {args.interval:g}.")
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        cycles, kept = 0, Watched()
        while not stop.is_set():
            started = time.monotonic()
            line = cycle(kept)
            cycles += 1
            print(f"xcore watch: {time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)
            if args.once:
                break
            stop.wait(max(0.0, args.interval - (time.monotonic() - started)))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"xcore watch: stopped after {cycles} cycle{'s' if cycles != 1 else ''}", file=sys.stderr)
    return EXIT_OK


class Watched:
    """What a watcher keeps from one cycle to the next, so that a cycle's cost follows what
    changed rather than what is active: the job records (read again only where their stored
    version moved, and not at all when the store says nothing was written), their loaded
    handles, and the state last applied to each record (``refresh_jobs``' ``applied``). Another
    process's write (a cancel, a relaunch, a retry) moves the store's marker and the versions
    of the rows it wrote, so those records are read again."""

    def __init__(self) -> None:
        from xcore.runtime.tracking import Applied

        self.records: dict[int, JobRecord] = {}  # job id -> its record, as refreshed last cycle
        self.versions: dict[int, tuple[Any, ...]] = {}  # job id -> the stored version it was read at
        self.loaded: dict[int, Any] = {}  # job id -> loaded handle (``refresh_jobs``' cache)
        self.applied = Applied()  # the states last applied to the records
        self.marker: object | None = None  # the store's change marker when last read
        self.active: list[int] = []
        self.cycles = 0
        self.dirty: set[int] = set()  # job ids to read again whatever their version says

    def jobs(self, store: MetadataStore, active: list[int]) -> list[JobRecord]:
        """The active jobs of ``active`` experiments: the kept records, the rows written since
        read again."""
        from xcore.store.base import HANDLE_IN_VERSION

        marker = store.change_marker()  # before reading: a write during the read moves it again
        if marker is not None and marker == self.marker and active == self.active:
            return list(self.records.values())
        self.marker, self.active = marker, active
        versions = store.active_job_versions(active) if active else {}
        known, old = self.versions, self.records
        stale = [job_id for job_id, version in versions.items() if known.get(job_id) != version]
        stale += [job_id for job_id in self.dirty.difference(stale) if job_id in versions]
        self.dirty = set()
        fresh = {job.id: job for job in store.active_jobs_among(active, stale)} if stale else {}
        for job_id in stale:  # a new row, or written since: its state afresh, its handle if another
            self.applied.forget(job_id)
            if job_id not in known or known[job_id][HANDLE_IN_VERSION] != versions[job_id][HANDLE_IN_VERSION]:
                self.loaded.pop(job_id, None)
        records, written = {}, set(stale)
        for job_id in versions:
            job = fresh.get(job_id) if job_id in written else old[job_id]
            if job is not None:  # (None: it ended between the two reads)
                records[job_id] = job
        for job_id in old.keys() - records.keys():  # no longer active
            self.loaded.pop(job_id, None)
            self.applied.forget(job_id)
        self.records, self.versions = records, versions
        return list(records.values())

    def forget(self, job_ids: Iterable[int]) -> None:
        """Read these jobs again next cycle: this watcher wrote them, or holds a state for them
        that the store does not (a backend out of reach marks a record UNKNOWN in memory only)."""
        for job_id in job_ids:
            self.dirty.add(job_id)
            self.marker = None


def cycle(kept: Watched | None = None) -> str:
    """One observation of every active experiment; returns the progress line. ``kept`` carries
    records, handles and states over from the watcher's previous cycle."""
    from xcore.model.status import Status
    from xcore.runtime import collector
    from xcore.runtime.orphans import resolve_orphans
    from xcore.runtime.retries import is_pending
    from xcore.runtime.tracking import any_retry_pending, refresh_jobs

    workspace = current()
    store = workspace.store
    if store.leases():  # a killed launcher (or relauncher): adopt or fail its work
        resolve_orphans(store, workspace.host, quiet=True)
    active = [e.id for e in store.list_experiments(limit=None) if e.has_active_units]
    if kept is not None:
        jobs = kept.jobs(store, active)
    else:
        jobs = store.active_jobs(active) if active else []
    attempts = [job.attempt for job in jobs]
    written: set[int] = set()

    def record(changes: list[tuple[int, Any]]) -> Sequence[int] | None:
        written.update(job_id for job_id, _ in changes)
        return store.record_states(changes)

    refresh_jobs(store, workspace.host, jobs, kept.loaded if kept is not None else None, record=record,
                 applied=kept.applied if kept is not None else None)  # records changes and runs the duties
    try:  # events no change shows (a unit waiting too long) and deliveries due for another try
        from xcore.runtime.notifications import tick

        tick(store, workspace.host, active)
    except Exception as exc:  # noqa: BLE001 - the watcher keeps watching whatever a sink does
        print(f"xcore watch: warning: notifications: {type(exc).__name__}: {exc}", file=sys.stderr)
    unknown = [job.id for job in jobs if job.status is Status.UNKNOWN] \
        if Status.UNKNOWN in map(operator.attrgetter("status"), jobs) else []  # marked in memory, not recorded
    if any_retry_pending(jobs):  # relaunched, or due
        retried = sum(attempt != job.attempt or is_pending(job) for job, attempt in zip(jobs, attempts, strict=True))
    else:  # (in C: a cycle of 50,000 held tasks)
        retried = sum(map(operator.ne, attempts, map(operator.attrgetter("attempt"), jobs)))
    if kept is not None:
        kept.forget(written)
        kept.forget(unknown)
        kept.cycles += 1
        collector.watch_cycle_ended(kept.cycles)
    changed = len(written.union(unknown))
    kinds = len(set(map(operator.attrgetter("handle_kind"), jobs)) - {None, ""})
    return (f"{len(active)} active experiment{'s' if len(active) != 1 else ''}, {len(jobs)} active jobs on "
            f"{kinds} backend kind{'s' if kinds != 1 else ''}, {changed} changed, {retried} retried")
