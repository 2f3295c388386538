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
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from xcore.errors import XcoreError
from xcore.workspace import current

if TYPE_CHECKING:
    from xcore.store.records import JobRecord

EXIT_OK = 0


def watch(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise XcoreError(f"--interval must be a number of seconds > 0, got {args.interval:g}.")
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        cycles, handles = 0, Handles()
        while not stop.is_set():
            started = time.monotonic()
            line = cycle(handles)
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


class Handles:
    """The loaded handles a watcher keeps from one cycle to the next: rebuilding 50,000 of
    them from their stored form was a sixth of a profiled cycle. A handle is loaded again when
    its stored form changes (another process relaunched the job), and forgotten when its
    job is no longer active."""

    def __init__(self) -> None:
        self.loaded: dict[int, Any] = {}  # job id -> loaded handle (``refresh_jobs``' cache)
        self.stored: dict[int, Any] = {}  # job id -> the stored handle it was loaded from

    def for_jobs(self, jobs: Sequence[JobRecord]) -> dict[int, Any]:
        """The cache for a refresh of ``jobs``, holding only handles still current."""
        loaded, stored = self.loaded, self.stored
        self.loaded = {job.id: loaded[job.id] for job in jobs
                       if job.id in loaded and stored.get(job.id) == job.handle}
        self.stored = {job.id: job.handle for job in jobs if job.handle is not None}
        return self.loaded


def cycle(handles: Handles | None = None) -> str:
    """One observation of every active experiment; returns the progress line. ``handles``
    carries loaded handles over from the watcher's previous cycle."""
    from xcore.runtime.orphans import resolve_orphans
    from xcore.runtime.retries import is_pending
    from xcore.runtime.tracking import refresh_jobs

    workspace = current()
    store = workspace.store
    if store.leases():  # a killed launcher (or relauncher): adopt or fail its work
        resolve_orphans(store, workspace.host, quiet=True)
    active = [e.id for e in store.list_experiments(limit=None) if e.has_active_units]
    jobs = store.active_jobs(active) if active else []
    before: dict[int, Any] = {job.id: (job.status, job.message, job.attempt) for job in jobs}
    cache = handles.for_jobs(jobs) if handles is not None else None
    refresh_jobs(store, workspace.host, jobs, cache)  # records changes and runs the duties (relaunches)
    try:  # events no change shows (a unit waiting too long) and deliveries due for another try
        from xcore.runtime.notifications import tick

        tick(store, workspace.host, active)
    except Exception as exc:  # noqa: BLE001 - the watcher keeps watching whatever a sink does
        print(f"xcore watch: warning: notifications: {type(exc).__name__}: {exc}", file=sys.stderr)
    changed = sum((job.status, job.message, job.attempt) != before[job.id] for job in jobs)
    retried = sum(job.attempt != before[job.id][2] or is_pending(job) for job in jobs)  # relaunched, or due
    kinds = len({job.handle_kind for job in jobs if job.handle_kind})
    return (f"{len(active)} active experiment{'s' if len(active) != 1 else ''}, {len(jobs)} active jobs on "
            f"{kinds} backend kind{'s' if kinds != 1 else ''}, {changed} changed, {retried} retried")
