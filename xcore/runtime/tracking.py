"""Asks backends for the state of recorded jobs and writes what changed to the store.

Used by the launcher process (``get_status``, ``wait_until_complete``) and by later
processes (``xcore show``/``list``/``wait``) alike, so status never depends on the launcher
still running. Jobs are grouped by handle kind: one backend call per kind.
"""

from __future__ import annotations

import itertools
import operator
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from xcore.errors import BackendUnavailableError, StoreFullError, XcoreError
from xcore.hooks.host import PluginHost
from xcore.model.status import JobState, Status, recorded_times
from xcore.runtime import retries
from xcore.runtime.observers import after_refresh, held_seen
from xcore.store import MetadataStore
from xcore.store.records import JobRecord, unreadable


def refresh_jobs(store: MetadataStore, host: PluginHost, jobs: Sequence[JobRecord],
                 cache: dict[int, Any] | None = None, unavailable: dict[int, str] | None = None,
                 record: Callable[[list[tuple[int, JobState]]], Sequence[int] | None] | None = None,
                 applied: Applied | None = None) -> list[JobRecord]:
    """Update the non-terminal ``jobs`` in place from their backends and record changes.

    A backend that cannot be asked (plugin missing, host unreachable) leaves the stored
    state as it is and marks the in-memory record UNKNOWN with the reason. ``cache`` (job
    id -> loaded handle) keeps the handles loaded by one poll for the next (a wait polls the
    same thousands of jobs again and again). ``unavailable``, when given, tracks the jobs whose
    backend is out of reach for now (``BackendUnavailableError``, an ``OSError``): their records
    are left as they are and their ids map to the reason until a poll reaches them again.
    ``record`` writes the changes (``store.record_states`` by default); a job whose state the
    store refused as an earlier attempt's (another observer relaunched it since the state was
    read) takes the store's record of its new attempt. ``applied`` (kept by a
    watcher between polls) skips a job whose backend returned the very state object applied to
    that same record last time: nothing of it can have changed.
    """
    by_kind: dict[str, list[JobRecord]] = defaultdict(list)
    for job in jobs:
        if job.status in _NOT_TERMINAL and job.handle_kind and job.handle is not None:
            by_kind[job.handle_kind].append(job)
    changes: list[tuple[int, JobState]] = []
    for kind, jobs_of_kind in by_kind.items():
        last = applied.kinds.pop(kind, None) if applied is not None else None
        if last is not None and _same_objects(last[0], jobs_of_kind):  # the records of the last poll
            group, handles = last[0], last[1]
        else:
            loaded = load_handles(host, jobs_of_kind, cache)
            group, handles = [job for job, _ in loaded], [handle for _, handle in loaded]
            last = None
        if not group:
            continue
        reached: list[tuple[JobRecord, JobState]]
        try:
            states = host.job_states(kind, handles)
            reached = list(zip(group, states, strict=True))
            if applied is not None:  # only what the backend says anew (another object, or another status)
                applied.kinds[kind] = (group, handles, states)
                news = (map(operator.or_, map(operator.is_not, states, last[2]), _other_status(group, states))
                        if last is not None else _not_applied(group, states, applied.states))
                reached = [reached[i] for i in itertools.compress(range(len(reached)), news)]
        except (BackendUnavailableError, OSError) as exc:
            known = getattr(exc, "states", None) or [None] * len(group)
            reason = f"backend unreachable: {str(exc).split('. ')[0]}"
            reached = []
            for job, state in zip(group, known, strict=True):
                if isinstance(state, JobState):
                    reached.append((job, state))
                elif unavailable is None:
                    job.status, job.message = Status.UNKNOWN, reason
                else:  # a passing outage: the record stays as the store has it
                    unavailable[job.id] = reason
        except XcoreError as exc:
            for job in group:
                job.status, job.message = Status.UNKNOWN, str(exc).split(". ")[0]
            continue
        now = time.time()
        if unavailable:
            for job, _ in reached:
                unavailable.pop(job.id, None)
        if any(state.status is Status.FAILED for _, state in reached):
            reached = retries.pending(store, reached)
        for job, state in reached:
            if applied is not None:
                applied.states[job.id] = state
            changed = (job.status, job.message, job.exit_code) != (state.status, state.message, state.exit_code)
            new_attempt = state.attempt is not None and state.attempt > job.attempt
            if new_attempt:  # the backend retried it: the new attempt's times start afresh
                job.started_at = job.ended_at = None
                job.attempt = state.attempt or job.attempt
            # The times the store will record, with the same rule and clock: the records returned
            # (e.g. by wait_until_complete) then say what `xcore show` says, an end included.
            started, ended = recorded_times(state, job.started_at, job.ended_at, now)
            if changed or new_attempt:  # earlier attempts come with the move to a new one
                # Recorded as the attempt whose handle was read: the store refuses it if another
                # observer has relaunched the job since (its next attempt is not this one's state).
                changes.append((job.id, JobState(state.status, state.message, state.exit_code, started, ended,
                                                 state.failure, job.attempt, state.previous_attempts)))
            job.status, job.message, job.exit_code = state.status, state.message, state.exit_code
            job.started_at, job.ended_at = started, ended
    candidates = _pending_or_held(jobs)  # one pass: a watcher's cycle has 50,000 PENDING jobs
    pending = [job for job in candidates if retries.is_pending(job)]
    if changes:
        try:
            refused = (record or store.record_states)(changes)
        except StoreFullError as exc:  # what was read is still right: show it, record it later
            warn_not_recorded(str(exc))
        else:
            if refused:  # relaunched meanwhile (e.g. by `xcore retry`): what was read is history
                relaunched = set(refused)
                _follow_relaunches(store, [job for job in jobs if job.id in relaunched], cache)
            changed_ids = {job_id for job_id, _ in changes}
            maybe_pending = any_retry_pending(jobs)  # usually not: no job is tested (a watcher's 50,000)
            after_refresh(store, host, [job for job in jobs
                                        if job.id in changed_ids or (maybe_pending and retries.is_pending(job))])
    elif pending:  # a relaunch an observer has not done yet
        after_refresh(store, host, pending)
    if changes or pending:  # the duties may have moved jobs
        candidates = _pending_or_held(jobs)
        pending = [job for job in candidates if retries.is_pending(job)]
    if pending:
        _follow_relaunches(store, pending, cache)
        if applied is not None:
            for job in pending:
                applied.states.pop(job.id, None)
    if any(job.status is Status.PENDING and job.handle is None for job in candidates):
        held_seen(store, host, jobs)  # held for their dependencies: decided by ones no one saw end?
    return list(jobs)


class Applied:
    """What a watcher's polls applied, kept for the next (``refresh_jobs``' ``applied``): per
    job id the state last applied to its record; per backend kind the records, handles and
    states of the last poll, compared object by object in C (``xcore watch`` polls 50,000 jobs
    a cycle, nearly all of them as they were)."""

    def __init__(self) -> None:
        self.states: dict[int, JobState] = {}
        self.kinds: dict[str, tuple[list[JobRecord], list[Any], list[JobState]]] = {}

    def forget(self, job_id: int) -> None:
        self.states.pop(job_id, None)


def _same_objects(first: Sequence[Any], second: Sequence[Any]) -> bool:
    return len(first) == len(second) and all(map(operator.is_, first, second))


_STATUS = operator.attrgetter("status")


def _other_status(jobs: Sequence[JobRecord], states: Sequence[JobState]) -> Iterator[bool]:
    """Per job, whether its record's status is not its state's (changed in memory since)."""
    return map(operator.is_not, map(_STATUS, jobs), map(_STATUS, states))


def _not_applied(jobs: Sequence[JobRecord], states: Sequence[JobState], applied: dict[int, JobState]) -> list[bool]:
    return [applied.get(job.id) is not state or job.status is not state.status
            for job, state in zip(jobs, states, strict=True)]


# Identity checks, not the enum's hash: refresh_jobs tests 50,000 statuses per watch cycle.
_NOT_TERMINAL = tuple(status for status in Status if not status.is_terminal)


def _pending_or_held(jobs: Sequence[JobRecord]) -> list[JobRecord]:
    """The jobs whose retry waits for an observer, and those held for their dependencies.
    Usually none: first asked of the distinct messages and in C (50,000 held tasks share a few)."""
    if not any_retry_pending(jobs) and not any(map(operator.is_, map(_HANDLE, jobs), itertools.repeat(None))):
        return []
    return [job for job in jobs if job.status is Status.PENDING
            and (job.handle is None or job.message.startswith(retries.RETRY_PENDING))]


_HANDLE, _MESSAGE = operator.attrgetter("handle"), operator.attrgetter("message")


def any_retry_pending(jobs: Sequence[JobRecord]) -> bool:
    """Whether a job's message may say its retry is pending (a cheap test: one per distinct message)."""
    return any(message.startswith(retries.RETRY_PENDING) for message in set(map(_MESSAGE, jobs)))


def _follow_relaunches(store: MetadataStore, pending: Sequence[JobRecord], cache: dict[int, Any] | None) -> None:
    """Jobs whose retry was pending may have been relaunched (here or by another observer):
    their records take the new attempt's handle and state, so a wait follows the new attempt."""
    for experiment_id in {job.experiment_id for job in pending}:
        mine = {job.id: job for job in pending if job.experiment_id == experiment_id}
        units = sorted({job.work_unit_id for job in mine.values()})
        for unit in store.work_units(experiment_id, units):
            for fresh in unit.jobs:
                job = mine.get(fresh.id)
                if job is None or fresh.attempt == job.attempt:
                    continue
                for field in ("status", "message", "exit_code", "handle_kind", "handle", "log_path", "launched_at",
                              "started_at", "ended_at", "attempt"):
                    setattr(job, field, getattr(fresh, field))
                if cache is not None:
                    cache.pop(job.id, None)


_warned: set[str] = set()


def warn_not_recorded(reason: str) -> None:
    """Say once per process that states read were not recorded (a read needs no disk space;
    the next command that can write records them)."""
    if reason not in _warned:
        _warned.add(reason)
        print(f"xcore: warning: {reason} The job states shown were not recorded.", file=sys.stderr)


def load_handles(host: PluginHost, jobs: Sequence[JobRecord],
                 cache: dict[int, Any] | None = None) -> list[tuple[JobRecord, Any]]:
    """Each job with its rebuilt handle (from ``cache`` by job id if there, added to it if
    not). A stored handle that no longer loads (a value of the wrong type, a field a newer
    plugin renamed) marks only that job UNKNOWN, with the reason, so one bad record never
    breaks reading the others."""
    if cache is not None:  # a watcher's cycle: every handle already loaded, found in one pass
        found = list(map(cache.get, [job.id for job in jobs]))
        if not any(map(operator.is_, found, itertools.repeat(None))):  # C-level: no handle's __eq__
            return list(zip(jobs, found, strict=True))
    loaded = []
    for job in jobs:
        if cache is not None and (handle := cache.get(job.id)) is not None:
            loaded.append((job, handle))
            continue
        try:
            handle = host.serializer.load(job.handle)
            if cache is not None:
                cache[job.id] = handle
            loaded.append((job, handle))
        except XcoreError as exc:  # e.g. the plugin that owns the kind is not installed
            job.status, job.message = Status.UNKNOWN, str(exc).split(". ")[0]
        except Exception as exc:  # noqa: BLE001 - any failure to rebuild it is reported per job
            job.status, job.message = Status.UNKNOWN, unreadable(exc)
    return loaded


NOTIFIED_MAX_INTERVAL = 2.0  # seconds between polls when the backend says when jobs end


def wait_for(
    fetch: Callable[[], list[JobRecord]],
    store: MetadataStore,
    host: PluginHost,
    *,
    timeout: float | None = None,
    on_poll: Callable[[list[JobRecord]], None] | None = None,
    interval: float = 0.05,
    max_interval: float = 0.25,
    refresh: bool = True,
    handles: dict[int, Any] | None = None,
    unavailable: dict[int, str] | None = None,
    on_outage: Callable[[dict[int, str]], None] | None = None,
) -> list[JobRecord]:
    """Poll until every fetched job is terminal (or UNKNOWN, which polling cannot fix).

    Between polls the backend of the active jobs may block until something changed
    (``xcore_wait_for_change``: a local runner says at once that its jobs ended); then a
    poll every ``NOTIFIED_MAX_INTERVAL`` is enough (for progress reports), and each poll of
    thousands of jobs costs the jobs CPU time. Else a sleep that grows from ``interval`` to
    ``max_interval``.
    A backend out of reach for now (``unavailable``: job id -> reason, filled by
    ``refresh_jobs``) is no answer: its jobs keep the wait going, polled with a backoff from
    1 to ``OUTAGE_MAX_PAUSE`` seconds, until they are reached again or the timeout passes;
    ``on_outage`` hears of each change of that set (by default a line on stderr).
    ``refresh=False`` when ``fetch`` already asks the backends itself (sharing ``handles``
    and ``unavailable``).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    if handles is None:
        handles = {}  # job id -> loaded handle, rebuilt once per wait, not per poll
    if unavailable is None:
        unavailable = {}
    report_outage = on_outage or _warn_outage
    outage_pause, out_of_reach = 1.0, frozenset[int]()
    while True:
        jobs = refresh_jobs(store, host, fetch(), handles, unavailable) if refresh else fetch()
        if on_poll:
            on_poll(jobs)
        if out_of_reach != unavailable.keys():
            out_of_reach = frozenset(unavailable)
            report_outage(dict(unavailable))
        if not unavailable and all(j.status.is_terminal or j.status is Status.UNKNOWN for j in jobs):
            return jobs
        if deadline is not None and time.monotonic() >= deadline:
            active = sum(not j.status.is_terminal for j in jobs)
            raise TimeoutError(f"{active} job{'' if active == 1 else 's'} still active after {timeout} s.")
        left = float("inf") if deadline is None else max(0.0, deadline - time.monotonic())
        if unavailable:
            time.sleep(min(outage_pause, left))
            outage_pause = min(outage_pause * 2, OUTAGE_MAX_PAUSE)
            continue
        outage_pause = 1.0
        if not _pause(host, jobs, min(interval, left), min(max(max_interval, NOTIFIED_MAX_INTERVAL), left), handles):
            interval = min(interval * 1.5, max_interval)


OUTAGE_MAX_PAUSE = 30.0  # seconds between polls of a backend that has been out of reach for a while


def outage_line(unavailable: dict[int, str]) -> str:
    """What a wait says when the jobs out of reach change."""
    if not unavailable:
        return "the backend answers again"
    count = len(unavailable)
    return (f"warning: {count} job{'' if count == 1 else 's'} out of reach "
            f"({next(iter(unavailable.values()))}); still waiting")


def _warn_outage(unavailable: dict[int, str]) -> None:
    import sys

    print(f"xcore: {outage_line(unavailable)}", file=sys.stderr)


def _pause(host: PluginHost, jobs: Sequence[JobRecord], seconds: float, notified_seconds: float,
           handles: dict[int, Any]) -> bool:
    """Wait for a change: through the backend, up to ``notified_seconds``, if all active jobs
    share one kind and its plugin can tell (``xcore_wait_for_change``; then True), else by
    sleeping ``seconds``."""
    active = [j for j in jobs if not j.status.is_terminal and j.status is not Status.UNKNOWN
              and j.handle_kind and j.handle is not None]
    kinds = {j.handle_kind for j in active}
    if len(kinds) == 1 and notified_seconds > 0:
        load_handles(host, [j for j in active if j.id not in handles], handles)
        try:
            kind, loaded = kinds.pop() or "", [handles[j.id] for j in active if j.id in handles]
            if host.wait_for_change(kind, loaded, notified_seconds):
                return True
        except (XcoreError, OSError):
            pass  # the next poll reports what is wrong; here only the pause is lost
    time.sleep(seconds)
    return False


def cancel_jobs(store: MetadataStore, host: PluginHost, jobs: Sequence[JobRecord]) -> int:
    """Cancel the active jobs among ``jobs``, batched per backend; return how many this call
    cancelled: a job that another canceller recorded CANCELLED first is not counted
    (``record_cancels``)."""
    by_kind: dict[str, list[tuple[JobRecord, Any]]] = {}
    handles: dict[int, Any] = {}  # each handle rebuilt once for the query, the cancel and the query after
    held = 0
    if any(j.status is Status.PENDING and j.handle is None for j in jobs):  # held for their dependencies
        from xcore.runtime.dependents import cancel_held

        held = len(cancel_held(store, host, jobs))
    # CANCELLED found here is another canceller's work, in flight: it records it (and counts it).
    def record_but_cancels(changes: list[tuple[int, JobState]]) -> None:
        store.record_states([(job_id, state) for job_id, state in changes if state.status is not Status.CANCELLED])

    active = [j for j in refresh_jobs(store, host, list(jobs), handles, record=record_but_cancels)
              if j.status.is_active and j.handle_kind and j.handle is not None]
    for job, handle in load_handles(host, active, handles):
        by_kind.setdefault(job.handle_kind or "", []).append((job, handle))
    for kind, pairs in by_kind.items():
        host.cancel(kind, [handle for _, handle in pairs])
    asked = [j for pairs in by_kind.values() for j, _ in pairs]
    claimed: set[int] = set()
    refresh_jobs(store, host, asked, handles, record=lambda changes: claimed.update(store.record_cancels(changes)))
    # Still stopping (a backend may take a while) counts; CANCELLED by someone else's record does not.
    return held + sum(j.status is not Status.CANCELLED or j.id in claimed for j in asked)
