"""``xcore watch``: a long-running observer for a lab to run in tmux or as a service.

Each cycle it reads the active jobs of every experiment with active units (one store query),
asks their backends (``refresh_jobs``: one query per handle kind, so one per cluster or API),
records what changed and runs the observers' duties (``xcore.runtime.observers``): a retry
the backend cannot drive is relaunched here even when no one else looks. Several watchers
(and ``xcore wait``, ``show``, the dashboard) may run at once: every duty claims its work in
the store. SIGINT or SIGTERM ends it after the cycle under way.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any

from xcore.errors import XcoreError
from xcore.workspace import current

EXIT_OK = 0


def watch(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise XcoreError(f"--interval must be a number of seconds > 0, got {args.interval:g}.")
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        cycles = 0
        while not stop.is_set():
            started = time.monotonic()
            line = cycle()
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


def cycle() -> str:
    """One observation of every active experiment; returns the progress line."""
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
    refresh_jobs(store, workspace.host, jobs)  # records changes and runs the duties (relaunches)
    changed = sum((job.status, job.message, job.attempt) != before[job.id] for job in jobs)
    retried = sum(job.attempt != before[job.id][2] or is_pending(job) for job in jobs)  # relaunched, or due
    kinds = len({job.handle_kind for job in jobs if job.handle_kind})
    return (f"{len(active)} active experiment{'s' if len(active) != 1 else ''}, {len(jobs)} active jobs on "
            f"{kinds} backend kind{'s' if kinds != 1 else ''}, {changed} changed, {retried} retried")
