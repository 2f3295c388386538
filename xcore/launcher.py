"""Collects the jobs a launch script adds and submits them in batches.

``experiment.add`` only records a work unit and queues its jobs; a background thread
submits whatever has queued once adds pause for a moment (``XCORE_BATCH_WINDOW`` seconds,
default 0.05) or someone waits for a result. A loop of 1,000 adds therefore reaches each
backend as one ``xcore_launch`` call per executor kind, which a backend can turn into
one submission (an array job).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

import attrs

from xcore import paths
from xcore.execution import LaunchContext, LaunchFailure, LaunchRequest, launch_failure_message
from xcore.plugins import PluginHost
from xcore.progress import Progress
from xcore.status import JobState, Status
from xcore.store import MetadataStore

MAX_BATCH = 100_000


class UnitTicket:
    """Resolves a work unit's future once all its queued jobs have been submitted."""

    def __init__(self, future: concurrent.futures.Future, value: object, jobs: int) -> None:
        self.future = future
        self.value = value
        self.remaining = jobs
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        if jobs == 0:
            future.set_result(value)

    def job_done(self, error: BaseException | None = None) -> None:
        with self._lock:
            self.error = self.error or error
            self.remaining -= 1
            if self.remaining:
                return
        if self.error is not None:
            self.future.set_exception(self.error)
        else:
            self.future.set_result(self.value)


@attrs.frozen
class PendingJob:
    request: LaunchRequest
    executor_kind: str
    ticket: UnitTicket


class BatchLauncher:
    def __init__(
        self,
        store: MetadataStore,
        host: PluginHost,
        progress: Progress,
        experiment_title: str,
        make_error: Callable[[str], BaseException],
    ) -> None:
        self._store = store
        self._host = host
        self._progress = progress
        self._title = experiment_title
        self._make_error = make_error
        self._window = float(os.environ.get("XCORE_BATCH_WINDOW", "0.05"))
        self._queue: list[PendingJob] = []
        self._cond = threading.Condition()
        self._busy = False
        self._flush = False
        self._closed = False
        self._last_add = 0.0
        self._thread: threading.Thread | None = None
        self.launched = 0
        self.errors: list[BaseException] = []

    def submit(self, jobs: Sequence[PendingJob]) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("The experiment is closed; create a new one to add work units.")
            self._queue.extend(jobs)
            self._last_add = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="xcore-launcher", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self) -> None:
        """Submit everything queued now and return when it has been submitted."""
        with self._cond:
            self._flush = True
            self._cond.notify_all()
            while self._queue or self._busy:
                self._cond.wait()
            self._flush = False

    def close(self) -> None:
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue and self._closed:
                    return
                while not self._flush and len(self._queue) < MAX_BATCH:
                    idle = time.monotonic() - self._last_add
                    if idle >= self._window:
                        break
                    self._cond.wait(self._window - idle)
                batch, self._queue = self._queue, []
                self._busy = True
            try:
                self._launch(batch)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _launch(self, batch: list[PendingJob]) -> None:
        by_kind: dict[str, list[PendingJob]] = defaultdict(list)
        for pending in batch:
            by_kind[pending.executor_kind].append(pending)
        for kind, group in by_kind.items():
            self._progress.update(f"launching {len(group)} jobs on {kind}")
            try:
                owner = self._host.kinds.owner(kind)
                context = LaunchContext(paths.plugin_state_dir(owner), self._progress, self._title)
                handles = self._host.launch(kind, [p.request for p in group], context)
            except BaseException as exc:  # record the failure; nothing of this group was submitted
                message = f"launch failed: {type(exc).__name__}: {exc}"
                self._store.record_states([(p.request.job_id, JobState(Status.FAILED, message)) for p in group])
                error = self._make_error(message)
                error.__cause__ = exc
                self.errors.append(error)
                for pending in group:
                    pending.ticket.job_done(error)
                self._progress.message(f"error: {len(group)} jobs on {kind}: {message}")
                continue
            serializer = self._host.serializer
            started = [(p, h) for p, h in zip(group, handles) if not isinstance(h, LaunchFailure)]
            self._store.mark_launched(
                [
                    (p.request.job_id, serializer.registry.kind_of(h), serializer.dump(h), getattr(h, "log_path", None))
                    for p, h in started
                ]
            )
            self._record_start_failures(kind, group, handles)
            self.launched += len(started)
            self._progress.update(f"launched {len(group)} jobs on {kind}", self.launched)

    def _record_start_failures(self, kind: str, group: list[PendingJob], handles: Sequence[object]) -> None:
        """Per-request failures (``LaunchFailure`` or a handle's ``error``) become FAILED jobs;
        a ``LaunchFailure`` also fails its unit's future, like a batch that failed as a whole."""
        failed: list[tuple[int, JobState]] = []
        for pending, handle in zip(group, handles):
            if isinstance(handle, LaunchFailure):
                message = launch_failure_message(handle.reason)
                failed.append((pending.request.job_id, JobState(Status.FAILED, message)))
                error = self._make_error(f"{pending.request.full_name}: {message}")
                self.errors.append(error)
                pending.ticket.job_done(error)
                continue
            if getattr(handle, "error", None):
                failed.append((pending.request.job_id, JobState(Status.FAILED, launch_failure_message(str(handle.error)))))  # type: ignore[attr-defined]
            pending.ticket.job_done()
        if failed:
            self._store.record_states(failed)
            self._progress.message(f"error: {len(failed)} of {len(group)} jobs on {kind} failed to launch")
