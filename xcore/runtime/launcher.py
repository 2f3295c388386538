"""Collects the jobs a launch script adds and submits them in batches, one per executor kind.

``experiment.add`` queues a work unit's records with the launcher's ``Recorder``
(``xcore.runtime.recorder``), which commits them in groups and only then queues its jobs
here: a job reaches a backend only after it is in the store. A background thread
submits a kind's queued jobs as one ``xcore_launch`` call when, and only when:

1. the script waits for anything of xcore (an add's future ``.result()`` or ``await``,
   ``get_status``, ``wait_until_complete``, ``stop``);
2. an async script gives control back to its event loop (any ``await`` that suspends), or a
   job generator does;
3. the ``with`` / ``async with`` block ends;
4. the kind has ``MAX_BATCH`` jobs queued;
5. for executors whose class sets ``batch_max_age`` (``xlocal.Local``: 0.05 s, where starting
   early is cheap), the kind's oldest queued job is that old; a class that also sets
   ``batch_first_max_age`` (``xlocal.Local``: 0) uses that age for the kind's first batch of
   the launch, so the first committed group of a sweep starts at once while the script
   still adds (``XCORE_BATCH_MAX_AGE`` overrides both).

Timing plays no other part: a plain loop of adds, however slow the machine, is one
submission per executor kind (one Slurm array job), and a long-running script gets its jobs
submitted as soon as it waits or awaits.

The launcher also leaves a trace for the case it dies (SIGKILL, power loss): a *lease* in the
store (host, pid, process start time, heartbeat) that tags every job it records, and an
*intent* per submission recorded before calling the backend. A later command that finds the
lease expired resolves its orphans (``xcore.runtime.orphans``). A store that fails while recording a
submission is retried; if it stays unusable, the launcher prints what was submitted where,
stops submitting and fails the launch.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from xcore import paths
from xcore.hooks.host import PluginHost
from xcore.model.dependencies import DependencyEdge
from xcore.model.execution import LaunchContext, LaunchFailure, LaunchRequest, launch_failure_message
from xcore.model.status import CANCELLED_AT_LAUNCH, JobState, Status
from xcore.progress import Progress, plural
from xcore.runtime.recorder import PendingAdd, Recorder
from xcore.settings import env_number
from xcore.store import MetadataStore

MAX_BATCH = 100_000
INTERRUPTED = "not launched: interrupted"
LAUNCH_CANCELLED = CANCELLED_AT_LAUNCH  # the message of jobs that ``LaunchFuture.cancel()`` kept from running
CANCEL_REQUESTED = "not launched: cancelled by `xcore cancel` during the launch"


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: stop submitting, record what was submitted."""


class StoreUnusableError(RuntimeError):
    """The metadata store kept failing while the launcher recorded a submission."""


_TICKETS_LOCK = threading.Lock()  # one for all tickets and lazy futures: a lock per unit costs memory
_PENDING, _FINISHED = "PENDING", "FINISHED"  # concurrent.futures' own state names


class UnitTicket:
    """Resolves a work unit's future once all its queued jobs have been submitted."""

    __slots__ = ("error", "future", "remaining", "value")

    def __init__(self, future: concurrent.futures.Future, value: object, jobs: int) -> None:
        self.future = future
        self.value = value
        self.remaining = jobs
        self.error: BaseException | None = None
        if jobs == 0:
            future.set_result(value)

    def job_done(self, error: BaseException | None = None) -> None:
        with _TICKETS_LOCK:
            self.error = self.error or error
            self.remaining -= 1
            if self.remaining:
                return
        _settle(self.future, self.value, self.error)

    @staticmethod
    def jobs_done(tickets: Sequence[UnitTicket]) -> None:
        """``job_done()`` for one submitted job of each ticket (a ticket may repeat), under one
        lock for the whole batch: a 10,000-job submission settles 10,000 futures at once."""
        finished: list[UnitTicket] = []
        with _TICKETS_LOCK:
            for ticket in tickets:
                ticket.remaining -= 1
                if not ticket.remaining:
                    finished.append(ticket)
            rest = [ticket for ticket in finished if not _settle_unwatched(ticket.future, ticket.value, ticket.error)]
        for ticket in rest:  # waited on, or not a LazyFuture: settled the usual way (it takes the lock)
            _settle(ticket.future, ticket.value, ticket.error)

    def fail(self, error: BaseException) -> None:
        """The unit was never recorded (its group's commit failed): nothing of it will run."""
        with _TICKETS_LOCK:
            if self.remaining <= 0:
                return
            self.remaining = 0
        _settle(self.future, None, error)


def _settle(future: concurrent.futures.Future, value: object, error: BaseException | None) -> None:
    """Give a unit's future its outcome, unless it already has one (a cancelled launch)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except concurrent.futures.InvalidStateError:
        pass


class LazyFuture(concurrent.futures.Future):
    """A Future that makes its Condition (an RLock, a deque and five bound methods, about
    1.2 KB) only when something waits on it or adds a callback. Each work unit has a future
    that is usually never waited on, and a 10,000-unit sweep held 10,000 Conditions (issue 14)."""

    def __init__(self) -> None:  # not super().__init__(), which makes the Condition
        self._state = _PENDING
        self._result = None
        self._exception = None

    # Its two lists too, made on first use (two objects less per unit for the garbage collector).
    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        return self.__dict__.setdefault("_made_waiters", [])

    @property
    def _done_callbacks(self) -> list[Any]:
        return self.__dict__.setdefault("_made_callbacks", [])

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        condition = self.__dict__.get("_made_condition")
        if condition is None:
            with _TICKETS_LOCK:
                condition = self.__dict__.setdefault("_made_condition", threading.Condition())
        return condition

    def set_result(self, result: Any) -> None:
        if not self._settled_without_condition(result, None):
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._settled_without_condition(None, exception):
            super().set_exception(exception)

    def _settled_without_condition(self, result: Any, exception: BaseException | None) -> bool:
        """Nobody has waited or added a callback yet (no Condition exists): settle directly.
        Under the same lock that makes the Condition, so a waiter arriving now sees the result."""
        with _TICKETS_LOCK:
            if "_made_condition" in self.__dict__:
                return False
            if self._state != _PENDING:
                raise concurrent.futures.InvalidStateError(f"{self._state}: {self!r}")
            return _settle_unwatched(self, result, exception)


def _settle_unwatched(future: concurrent.futures.Future, result: Any, exception: BaseException | None) -> bool:
    """Settle a ``LazyFuture`` nobody watches, for a caller already holding ``_TICKETS_LOCK``;
    False (nothing done) for a future someone waits on, one already settled (its own
    ``set_result`` then raises as usual), or another kind of future."""
    if type(future) is not LazyFuture or "_made_condition" in future.__dict__ or future._state != _PENDING:
        return False
    future._result, future._exception = result, exception
    future._state = _FINISHED
    return True


class PendingJob:
    """A recorded job waiting for its submission (plain slots: one per job of a sweep);
    ``edges``: its unit's dependencies (``xcore.runtime.dependencies``)."""

    __slots__ = ("edges", "executor_kind", "request", "ticket")

    def __init__(self, request: LaunchRequest, executor_kind: str, ticket: UnitTicket,
                 edges: Sequence[DependencyEdge] = ()) -> None:
        self.request, self.executor_kind, self.ticket, self.edges = request, executor_kind, ticket, edges


class _Queued:
    __slots__ = ("at", "job", "max_age", "seq")

    def __init__(self, seq: int, at: float, max_age: float | None, job: PendingJob) -> None:
        self.seq, self.at, self.max_age, self.job = seq, at, max_age, job


def hostname() -> str:
    """This machine's name, as ``socket.gethostname()`` gives it (the kernel's node name),
    without importing socket (~4 ms of a launch's start-up)."""
    return os.uname().nodename


def process_start_time(pid: int) -> float | None:
    """When ``pid`` started (seconds since boot, from /proc), or None if it does not exist.
    With the pid it names one process: a pid reused later has another start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        if fields[0] in (b"Z", b"X"):
            return None
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except FileNotFoundError:
        return None
    except (OSError, IndexError, ValueError):  # no /proc: fall back to "does the pid exist"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return -1.0


def store_retry_secs() -> float:
    return env_number("XCORE_STORE_RETRY_SECS", 30)


def lease_secs() -> float:
    """How long a launcher on another host may go without a heartbeat before its lease expires."""
    return env_number("XCORE_LEASE_SECS", 60)


class _Launched(Sequence[tuple[int, str, dict[str, Any], str | None]]):
    """``mark_launched``'s rows (job id, handle kind, dumped handle, log path), each dumped
    when read: the store encodes each handle as it writes it, so 100,000 handles' dicts
    (~45 MiB, the launcher's peak) are never held at once (issue 31)."""

    def __init__(self, host: PluginHost, started: list[tuple[PendingJob, Any]]) -> None:
        self._serializer, self._started = host.serializer, started

    def __len__(self) -> int:
        return len(self._started)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._row(pair) for pair in self._started[index]]
        return self._row(self._started[index])

    def __iter__(self) -> Iterator[tuple[int, str, dict[str, Any], str | None]]:
        return map(self._row, self._started)

    def _row(self, pair: tuple[PendingJob, Any]) -> tuple[int, str, dict[str, Any], str | None]:
        pending, handle = pair
        serializer = self._serializer
        return (pending.request.job_id, serializer.registry.kind_of(handle), serializer.dump(handle),
                getattr(handle, "log_path", None))


class BatchLauncher:
    def __init__(
        self,
        store: MetadataStore,
        host: PluginHost,
        progress: Progress,
        experiment_title: str,
        make_error: Callable[[str], BaseException],
        experiment_id: int = 0,
    ) -> None:
        self._store = store
        self._host = host
        self._progress = progress
        self._title = experiment_title
        self._make_error = make_error
        self._experiment_id = experiment_id
        self._queue: dict[str, list[_Queued]] = {}  # per executor kind, oldest first
        self._cond = threading.Condition()
        self._busy = False
        self._seq = 0
        self._flush_upto = 0
        self._closed = False
        self._broken: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._lease_id: int | None = None
        self._lease_lock = threading.Lock()
        self._heartbeat_stop = threading.Event()
        self._max_age_override = os.environ.get("XCORE_BATCH_MAX_AGE")
        self._taken_kinds: set[str] = set()  # kinds of which a batch was taken (``batch_first_max_age``)
        self._unrecorded: list[tuple[int, str, dict[str, Any], str | None]] = []  # submitted, store failed
        self.launched = 0
        self.submitted = 0  # jobs queued through this launcher
        self.errors: list[BaseException] = []
        self._cancelled_units: set[int] = set()  # units whose launch was cancelled (``cancel_unit``)
        self._in_flight: list[PendingJob] = []  # the batch being submitted
        self.recorder = Recorder(store, self.lease_id, self._recorded, self._record_failed)
        self.on_unrecorded: Callable[[list[int]], None] | None = None

    # -- recording adds (xcore.runtime.recorder) ------------------------------------------

    def record(self, pending: PendingAdd) -> None:
        """Queue an add's records; its jobs are queued for launch once they are committed."""
        self.recorder.add(pending)

    def _recorded(self, group: Sequence[PendingAdd], ids: list[list[int]]) -> None:
        jobs = []
        for pending, job_ids in zip(group, ids, strict=True):
            write = pending.write
            jobs += [
                PendingJob(LaunchRequest(job_id, write.experiment_id, write.work_unit_id, name, executable, executor,
                                         args, env, retry=retry), kind, pending.ticket, write.depends_on)
                for job_id, (name, executable, executor, args, env, kind, retry)
                in zip(job_ids, pending.jobs, strict=True)
            ]
        if jobs:
            self.submit(jobs)

    def _record_failed(self, group: Sequence[PendingAdd], exc: BaseException) -> None:
        if isinstance(exc, Exception) and not any(error is exc for error in self.errors):
            self.errors.append(exc)  # once: the adds refused after a group fail with its error
        if self.on_unrecorded is not None:  # the experiment forgets units that were never recorded
            self.on_unrecorded([p.write.work_unit_id for p in group if p.write.role is not None])
        for pending in group:
            if pending.ticket is not None:
                pending.ticket.fail(exc)

    # -- lease -----------------------------------------------------------------------------

    def lease_id(self) -> int | None:
        """This launcher's lease, opened on first use; jobs are recorded under it."""
        with self._lease_lock:
            if self._lease_id is None and self._experiment_id:
                pid = os.getpid()
                self._lease_id = self._store.open_lease(self._experiment_id, hostname(), pid,
                                                        process_start_time(pid))
                if self._lease_id is not None:
                    threading.Thread(target=self._heartbeat, args=(self._lease_id,), name="xcore-lease",
                                     daemon=True).start()
            return self._lease_id

    def _heartbeat(self, lease_id: int) -> None:
        interval = max(0.5, lease_secs() / 4)
        while not self._heartbeat_stop.wait(interval):
            with contextlib.suppress(Exception):  # the store is busy or failing; the next beat tries again
                self._store.heartbeat(lease_id)

    def _close_lease(self) -> None:
        self._heartbeat_stop.set()
        if (lease_id := self._lease_id) is None:
            return
        if self._broken is not None:
            self._resolve_own_lease(lease_id)
            return
        try:
            self._retry_store(lambda: self._store.close_lease(lease_id), "closing the launch lease")
        except StoreUnusableError as exc:
            self.errors.append(exc)

    def _resolve_own_lease(self, lease_id: int) -> None:
        """After a store failure: if the store works again, record the handles kept in memory
        and mark what was never submitted; if not, keep the lease for a later command."""
        reason = "not launched: the metadata store failed during the launch"
        try:
            in_flight, queued = self._store.lease_orphans(lease_id)
            done = {job_id for job_id, *_ in self._unrecorded}
            left = [job for _, group in in_flight for job in group] + queued
            failed = [(job.id, JobState(Status.FAILED, reason)) for job in left if job.id not in done]
            self._store.resolve_lease(lease_id, self._unrecorded, failed, str(self._broken))
        except Exception as exc:
            print(f"error: the metadata store is still failing ({type(exc).__name__}: {exc}); the next xcore "
                  "command records this launch's jobs.", file=sys.stderr, flush=True)
            return
        print(f"xcore: the metadata store works again: recorded {len(self._unrecorded)} submitted jobs and "
              f"{len(failed)} not submitted.", file=sys.stderr, flush=True)
        self._unrecorded = []

    # -- queueing --------------------------------------------------------------------------

    def submit(self, jobs: Sequence[PendingJob]) -> None:
        if self._cancelled_units:  # a cancelled generator's last adds: recorded, never launched
            dropped = [job for job in jobs if job.request.work_unit_id in self._cancelled_units]
            if dropped:
                jobs = [job for job in jobs if job.request.work_unit_id not in self._cancelled_units]
                self._record_cancelled(dropped)
        now = time.monotonic()
        with self._cond:
            if self._closed:
                raise RuntimeError("The experiment is closed; create a new one to add work units.")
            self.submitted += len(jobs)
            wake = False
            for job in jobs:
                self._seq += 1
                group = self._queue.setdefault(job.executor_kind, [])
                group.append(_Queued(self._seq, now, self._max_age(job), job))
                # The thread only needs to look again when a kind gets its first job (a new max-age
                # deadline) or reaches MAX_BATCH; waking it on every add would cost O(n^2) in a loop.
                wake = wake or len(group) == 1 or len(group) >= MAX_BATCH
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="xcore-launcher", daemon=True)
                self._thread.start()
            if wake:
                self._cond.notify_all()

    def _max_age(self, job: PendingJob) -> float | None:
        executor_class = type(job.request.executor)
        age = getattr(executor_class, "batch_max_age", None)
        if age is None:
            return None
        if self._max_age_override:
            return float(self._max_age_override)
        first = getattr(executor_class, "batch_first_max_age", None)
        return age if first is None or job.executor_kind in self._taken_kinds else first

    def request_flush(self) -> None:
        """Submit everything queued now, without waiting for it (recording it first)."""
        self.recorder.flush()
        with self._cond:
            self._flush_upto = self._seq
            self._cond.notify_all()

    def flush(self) -> None:
        """Record and submit everything queued now and return when it has been submitted."""
        self.recorder.flush()
        with self._cond:
            target = self._flush_upto = max(self._flush_upto, self._seq)
            self._cond.notify_all()
            while self._busy or any(group[0].seq <= target for group in self._queue.values()):
                self._cond.wait()

    def close(self) -> None:
        try:
            self.recorder.close()
        except Exception:  # in self.errors already; still submit and record what was committed
            pass
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        self._close_lease()

    def cancel_unit(self, unit_id: int) -> int:
        """``experiment.add(...).cancel()``: none of the unit's jobs that a backend has not been
        handed yet ever will be (now or later, e.g. a cancelled job generator's last adds); they
        end CANCELLED with ``LAUNCH_CANCELLED`` and their futures are cancelled. A submission of
        the unit's jobs already under way is waited for: the caller stops what it started.
        Returns how many jobs were kept from running."""
        try:
            self.recorder.flush()  # the unit's adds committed, so their jobs are in the queue below
        except Exception:  # noqa: S110 - a refused group: its futures failed, the block's end raises it
            pass
        with self._cond:
            self._cancelled_units.add(unit_id)
            dropped: list[PendingJob] = []
            for kind in list(self._queue):
                group = self._queue[kind]
                kept = [q for q in group if q.job.request.work_unit_id != unit_id]
                if len(kept) != len(group):
                    dropped += [q.job for q in group if q.job.request.work_unit_id == unit_id]
                    if kept:
                        self._queue[kind] = kept
                    else:
                        del self._queue[kind]
            self._cond.notify_all()
            while any(p.request.work_unit_id == unit_id for p in self._in_flight):
                self._cond.wait()
        self._record_cancelled(dropped)
        return len(dropped)

    def _record_cancelled(self, dropped: Sequence[PendingJob]) -> None:
        if not dropped:
            return
        states = [(p.request.job_id, JobState(Status.CANCELLED, LAUNCH_CANCELLED)) for p in dropped]
        try:
            self._retry_store(lambda: self._store.record_states(states), "recording cancelled jobs")
        except StoreUnusableError as exc:
            self.errors.append(exc)
        for pending in dropped:
            pending.ticket.future.cancel()  # its later job_done() calls find it settled

    def abort(self, reason: str = INTERRUPTED) -> int:
        """Stop submitting: jobs not yet handed to a backend end CANCELLED with ``reason``; a
        submission already under way finishes and is recorded. Adds not yet committed are
        committed first (their ids were handed out), then cancelled with the rest. Returns how
        many were dropped."""
        try:
            self.recorder.close()
        except BaseException:  # noqa: S110 - their futures failed; the sweep below catches the rest
            pass
        with self._cond:
            dropped = [q for group in self._queue.values() for q in group]
            self._queue = {}
            self._closed = True
            self._cond.notify_all()
        if dropped:
            states = [(q.job.request.job_id, JobState(Status.CANCELLED, reason)) for q in dropped]
            try:
                self._retry_store(lambda: self._store.record_states(states), "recording the interrupted jobs")
            except StoreUnusableError as exc:
                self.errors.append(exc)
            error = self._make_error(reason)
            for queued in dropped:
                queued.job.ticket.job_done(error)
        if self._thread is not None:
            self._thread.join()
        swept = self._cancel_unsubmitted(reason)
        self._close_lease()
        return len(dropped) + swept

    def _cancel_unsubmitted(self, reason: str) -> int:
        """Jobs of this lease still LAUNCHING that were never handed to a backend (e.g. an
        interrupt landed between a group's commit and its queueing): cancel them too, so no
        job is left LAUNCHING once the lease is closed."""
        if self._lease_id is None or self._broken is not None:
            return 0
        lease_id = self._lease_id
        try:
            _, never = self._retry_store(lambda: self._store.lease_orphans(lease_id), "finding unsubmitted jobs")
            states = [(job.id, JobState(Status.CANCELLED, reason)) for job in never]
            if states:
                self._retry_store(lambda: self._store.record_states(states), "recording the interrupted jobs")
        except StoreUnusableError as exc:
            self.errors.append(exc)
            return 0
        return len(states)

    # -- the submitting thread -------------------------------------------------------------

    def _take_ready(self) -> tuple[list[PendingJob], float | None]:
        """Jobs to submit now, and the time (monotonic) at which more will be due."""
        now = time.monotonic()
        ready: list[str] = []
        due: float | None = None
        for kind, group in self._queue.items():
            first = group[0]  # the oldest: lowest sequence number, earliest deadline
            if self._closed or len(group) >= MAX_BATCH or first.seq <= self._flush_upto:
                ready.append(kind)
            elif first.max_age is not None:
                deadline = first.at + first.max_age
                if deadline <= now:
                    ready.append(kind)
                else:
                    due = deadline if due is None else min(due, deadline)
        taken = [q.job for kind in ready for q in self._queue.pop(kind)]
        self._taken_kinds.update(ready)
        return taken, due

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    batch, due = self._take_ready()
                    if batch or (self._closed and not self._queue):
                        break
                    self._cond.wait(None if due is None else max(0.0, due - time.monotonic()))
                if not batch:
                    return
                self._busy = True
                self._in_flight = batch
            try:
                self._launch(batch)
            except BaseException as exc:  # never die silently: fail what this batch held
                error = self._make_error(f"launch failed: {type(exc).__name__}: {exc}")
                error.__cause__ = exc
                self.errors.append(error)
                for pending in batch:
                    if not pending.ticket.future.done():
                        pending.ticket.job_done(error)
            finally:
                with self._cond:
                    self._busy = False
                    self._in_flight = []
                    self._cond.notify_all()

    def _retry_store(self, call: Callable[[], Any], what: str) -> Any:
        """Run a store call, retrying for ``XCORE_STORE_RETRY_SECS`` (each try already waits
        for the store's lock); give up with StoreUnusableError."""
        deadline = time.monotonic() + store_retry_secs()
        delay = 0.1
        while True:
            try:
                return call()
            except Exception as exc:  # sqlite3.Error, OSError (disk full), a plugin store's errors
                if time.monotonic() >= deadline:
                    raise StoreUnusableError(f"the metadata store failed while {what}: {type(exc).__name__}: {exc}"
                                             ) from exc
                self._progress.message(f"warning: the metadata store failed while {what} ({exc}); retrying")
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _launch(self, batch: list[PendingJob]) -> None:
        by_kind: dict[str, list[PendingJob]] = defaultdict(list)
        for pending in batch:
            by_kind[pending.executor_kind].append(pending)
        for kind, whole in by_kind.items():
            for start in range(0, len(whole), MAX_BATCH):
                self._launch_group(kind, whole[start : start + MAX_BATCH])

    def _launch_group(self, kind: str, group: list[PendingJob]) -> None:
        if self._cancelled_units:  # cancelled after they were taken from the queue: still not started
            cancelled = [p for p in group if p.request.work_unit_id in self._cancelled_units]
            if cancelled:
                self._record_cancelled(cancelled)
                group = [p for p in group if p.request.work_unit_id not in self._cancelled_units]
                if not group:
                    return
        if self._broken is not None:
            self._fail_tickets(group, self._broken)
            return
        lease = self._lease_id
        try:
            group = self._drop_cancel_requested(group)
            if group and any(p.edges for p in group):
                group = self._gate(kind, group)
            if not group:
                return
            job_ids = [p.request.job_id for p in group]
            intent = None if lease is None else self._retry_store(
                lambda: self._store.begin_intent(lease, kind, job_ids), "recording a submission")
        except StoreUnusableError as exc:  # nothing reached the backend; the lease resolves these later
            self._break(exc, f"{plural(len(group), 'job')} on {kind} were not submitted.")
            self._fail_tickets(group, self._broken)
            return
        self._progress.update(f"launching {plural(len(group), 'job')} on {kind}")
        try:
            owner = self._host.kinds.owner(kind)
            context = LaunchContext(paths.plugin_state_dir(owner), self._progress, self._title)
            handles = self._host.launch(kind, [p.request for p in group], context)
        except BaseException as exc:  # record the failure; nothing of this group was submitted
            message = f"launch failed: {type(exc).__name__}: {exc}"
            error = self._make_error(message)
            error.__cause__ = exc
            self.errors.append(error)
            self._fail_tickets(group, error)
            self._progress.message(f"error: {plural(len(group), 'job')} on {kind}: {message}")
            states = [(job_id, JobState(Status.FAILED, message, failure="launch")) for job_id in job_ids]
            try:
                self._retry_store(lambda: self._store.record_states(states, intent_id=intent),
                                  "recording a failed submission")
            except StoreUnusableError as store_exc:
                self._break(store_exc, f"{plural(len(group), 'job')} on {kind} failed to launch ({message}).")
            return
        started = [(p, h) for p, h in zip(group, handles, strict=True) if not isinstance(h, LaunchFailure)]
        launched = _Launched(self._host, started)
        try:
            self._retry_store(lambda: self._store.mark_launched(launched, intent_id=intent),
                              "recording a submission")
        except StoreUnusableError as exc:
            self._unrecorded += launched
            self._break(exc, self._unrecorded_report(kind, launched))
            self._fail_tickets(group, self._broken)
            return
        self._record_start_failures(kind, group, handles)
        self.launched += len(started)
        self._progress.update(f"launched {plural(len(started), 'job')} on {kind}", self.launched)
        self._cancel_if_requested(started)

    # -- dependencies (``xcore.runtime.dependencies``) -------------------------------------

    def _gate(self, kind: str, group: list[PendingJob]) -> list[PendingJob]:
        """The jobs of ``group`` to submit now; held units and jobs whose dependency ended
        otherwise are recorded (PENDING ``waiting for ...``, CANCELLED ``dependency ... failed``)
        and their futures settled: for the script, they are launched."""
        from xcore.runtime import dependencies

        sorted_ = dependencies.gate(self._store, self._host, kind, group)
        if sorted_.cancelled:
            states = [(p.request.job_id, JobState(Status.CANCELLED, why)) for p, why in sorted_.cancelled]
            self._retry_store(lambda: self._store.record_states(states), "recording jobs whose dependency failed")
            UnitTicket.jobs_done([p.ticket for p, _ in sorted_.cancelled])
        if sorted_.held:
            for _, jobs, _ in sorted_.held:
                for pending in jobs:
                    dependencies.keep_request(self._host, pending.request)
            units = [key for key, _, _ in sorted_.held]
            held = [(p.request.job_id, JobState(Status.PENDING, why)) for _, jobs, why in sorted_.held for p in jobs]
            self._retry_store(lambda: self._store.hold_units(units, held), "recording held work units")
            UnitTicket.jobs_done([p.ticket for _, jobs, _ in sorted_.held for p in jobs])
        return sorted_.submit

    # -- cancel requests (``xcore cancel`` while this launch submits) ----------------------

    def _drop_cancel_requested(self, group: list[PendingJob]) -> list[PendingJob]:
        """Before a submission: jobs whose experiment or unit ``xcore cancel`` named are recorded
        CANCELLED and never submitted; the rest are returned."""
        experiment_id, lease = group[0].request.experiment_id, self._lease_id
        request = self._retry_store(lambda: self._store.cancel_requested(experiment_id, lease),
                                    "reading cancel requests")
        if not (request.whole or request.units):
            return group
        dropped = [p for p in group if request.covers(p.request.work_unit_id)]
        if dropped:
            states = [(p.request.job_id, JobState(Status.CANCELLED, CANCEL_REQUESTED)) for p in dropped]
            self._retry_store(lambda: self._store.record_states(states), "recording cancelled jobs")
            for pending in dropped:
                pending.ticket.future.cancel()
            self._progress.message(f"{plural(len(dropped), 'job')} not submitted: {CANCEL_REQUESTED}")
        return [p for p in group if not request.covers(p.request.work_unit_id)]

    def _cancel_if_requested(self, started: list[tuple[PendingJob, Any]]) -> None:
        """After a submission: a cancel that arrived while it ran found these jobs without a
        handle; cancel them now and record what the backend says."""
        if not started:
            return
        try:
            experiment_id, lease = started[0][0].request.experiment_id, self._lease_id
            request = self._retry_store(lambda: self._store.cancel_requested(experiment_id, lease),
                                        "reading cancel requests")
        except StoreUnusableError as exc:
            self.errors.append(exc)
            return
        by_kind: dict[str, list[tuple[PendingJob, Any]]] = defaultdict(list)
        for pending, handle in started:
            if request.covers(pending.request.work_unit_id):
                by_kind[self._host.serializer.registry.kind_of(handle)].append((pending, handle))
        for handle_kind, hit in by_kind.items():
            try:
                handles = [h for _, h in hit]
                self._host.cancel(handle_kind, handles)
                states = self._host.job_states(handle_kind, handles)
                changes = [(p.request.job_id, state) for (p, _), state in zip(hit, states, strict=True)]
                self._retry_store(lambda changes=changes: self._store.record_states(changes),  # type: ignore[misc]
                                  "recording cancelled jobs")
            except StoreUnusableError as exc:
                self.errors.append(exc)
                continue
            except Exception as exc:  # noqa: BLE001 - the backend refused: say so, the jobs stay as recorded
                self._progress.message(f"error: cancelling jobs submitted during `xcore cancel` failed: {exc}")
                continue
            self._progress.message(f"cancelled {plural(len(hit), 'job')} submitted while `xcore cancel` ran")

    def _fail_tickets(self, group: list[PendingJob], error: BaseException | None) -> None:
        for pending in group:
            pending.ticket.job_done(error)

    def _break(self, exc: StoreUnusableError, detail: str) -> None:
        """The store is unusable: stop submitting, say loudly what happened to what."""
        first = self._broken is None
        if first:
            error = self._make_error(f"{exc}. Stopped submitting. {detail}")
            error.__cause__ = exc
            self._broken = error
            self.errors.append(error)
        else:
            self.errors.append(self._make_error(detail))
        print(f"error: {exc}. {detail}", file=sys.stderr, flush=True)

    def _unrecorded_report(self, kind: str, launched: Sequence[tuple[int, str, dict[str, Any], str | None]]) -> str:
        """Where the submitted-but-unrecorded jobs are: in a file if one can be written, else inline."""
        lines = [json.dumps({"job_id": job_id, "handle_kind": hk, "handle": h, "log_path": log})
                 for job_id, hk, h, log in launched]
        text = "\n".join(lines) + "\n"
        try:
            target = paths.home() / f"unrecorded-{os.getpid()}-{int(time.time())}.jsonl"
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(text)
            where = f"their handles are in {target}"
        except OSError:
            where = "their handles follow, one per line:\n" + text
        return (f"{len(launched)} jobs were submitted to {kind} but not recorded; a later xcore command adopts "
                f"them once the store works again (the launcher's lease is kept); {where}")

    def _record_start_failures(self, kind: str, group: list[PendingJob], handles: Sequence[object]) -> None:
        """Per-request failures (``LaunchFailure`` or a handle's ``error``) become FAILED jobs;
        a ``LaunchFailure`` also fails its unit's future, like a batch that failed as a whole."""
        failed: list[tuple[int, JobState]] = []
        done: list[UnitTicket] = []  # submitted: their futures are settled together below
        for pending, handle in zip(group, handles, strict=True):
            if isinstance(handle, LaunchFailure):
                message = launch_failure_message(handle.reason)
                failed.append((pending.request.job_id, JobState(Status.FAILED, message, failure="launch")))
                error = self._make_error(f"{pending.request.full_name}: {message}")
                self.errors.append(error)
                pending.ticket.job_done(error)
                continue
            if reported := getattr(handle, "error", None):
                failed.append((pending.request.job_id, JobState(Status.FAILED, launch_failure_message(str(reported)),
                                                                failure="launch")))
            done.append(pending.ticket)
        UnitTicket.jobs_done(done)
        if failed:
            self._progress.message(f"error: {len(failed)} of {plural(len(group), 'job')} on {kind} failed to launch")
            try:
                self._retry_store(lambda: self._store.record_states(failed), "recording jobs that failed to start")
            except StoreUnusableError as exc:  # still LAUNCHING under the lease: a later command resolves them
                self._break(exc, f"{plural(len(failed), 'job')} on {kind} failed to launch.")
