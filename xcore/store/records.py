"""What the metadata store keeps: experiments, work units, jobs and their status history."""

from __future__ import annotations

import time
from typing import Any

import attrs

from xcore.model import datamodel
from xcore.model.dependencies import DependencyEdge
from xcore.model.status import Status, combine


@datamodel.define
class JobRecord:
    id: int
    experiment_id: int
    work_unit_id: int
    name: str
    executor_kind: str
    executor: dict[str, Any]
    executable: dict[str, Any]
    args: list[str]
    env: dict[str, str]  # secrets redacted
    status: Status = Status.LAUNCHING
    message: str = ""
    exit_code: int | None = None
    handle_kind: str | None = None
    handle: dict[str, Any] | None = None
    log_path: str | None = None
    created_at: float = 0.0
    launched_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    attempt: int = 1  # the attempt the row holds (read by polls and ``lease_orphans``; 1 elsewhere)

    @property
    def duration(self) -> float | None:
        return _elapsed(self.started_at, self.ended_at)


@datamodel.frozen
class AttemptRecord:
    """An earlier attempt of a job, as ``job_attempts`` keeps it: written once, never changed,
    with the handle and log of that attempt (``xcore logs --attempt K``)."""

    number: int
    status: Status
    failure: str | None = None
    exit_code: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    message: str = ""
    handle_kind: str | None = None
    handle: dict[str, Any] | None = None
    log_path: str | None = None

    @property
    def duration(self) -> float | None:
        return None if self.started_at is None else _elapsed(self.started_at, self.ended_at or self.started_at)


@datamodel.define
class JobAttempts:
    """A job's attempts: the one its row holds (``current``, with the ``failure`` class of its
    last failure) and the earlier ones, oldest first."""

    job_id: int
    current: int = 1
    failure: str | None = None
    earlier: list[AttemptRecord] = attrs.field(factory=list)

    @property
    def count(self) -> int:
        return max([self.current, *(a.number for a in self.earlier)])

    @property
    def last_failure(self) -> str | None:
        """The class of the newest failure: the current attempt's, else the newest earlier one's."""
        if self.failure:
            return self.failure
        return next((a.failure for a in reversed(self.earlier) if a.failure), None)

    def earlier_seconds(self) -> float:
        """The run time of the earlier attempts (a job's duration counts every attempt)."""
        return sum(d for a in self.earlier if (d := a.duration) is not None)


@datamodel.frozen
class LeaseRecord:
    """A launcher's claim on the jobs it recorded but may not have submitted yet: who holds it
    (host, pid and that process's start time) and when it last said it was alive."""

    id: int
    experiment_id: int
    host: str
    pid: int
    proc_start: float | None
    heartbeat: float
    state: str  # "open", or "resolving" while a later command adopts its orphans


@datamodel.define
class WorkUnitRecord:
    experiment_id: int
    id: int
    role: str  # "work_unit" or "auxiliary"
    args: Any
    identity: str = ""
    created_at: float = 0.0
    jobs: list[JobRecord] = attrs.field(factory=list)

    @property
    def status(self) -> Status:
        return combine(j.status for j in self.jobs)

    @property
    def exit_codes(self) -> list[int | None]:
        return [j.exit_code for j in self.jobs]

    @property
    def started_at(self) -> float | None:
        starts = [j.started_at for j in self.jobs if j.started_at is not None]
        return min(starts) if starts else None

    @property
    def ended_at(self) -> float | None:
        ends = [j.ended_at for j in self.jobs]
        return max(ends) if ends and all(e is not None for e in ends) else None  # type: ignore[type-var]

    @property
    def duration(self) -> float | None:
        return _elapsed(self.started_at, self.ended_at)


@datamodel.define
class UnitSummary:
    """A work unit as a table row (the dashboard's): its jobs folded into one status, the
    earliest start, the latest end (None while any job has not ended) and the messages of
    jobs that did not complete, without the jobs' stored specs."""

    id: int
    role: str
    args: Any
    status: Status
    created_at: float
    started_at: float | None
    ended_at: float | None
    message: str = ""

    @property
    def duration(self) -> float | None:
        return _elapsed(self.started_at, self.ended_at)


@datamodel.define
class ExperimentRecord:
    id: int
    title: str
    tags: list[str] = attrs.field(factory=list)
    notes: str = ""
    script_path: str | None = None
    script_sha256: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    user: str = ""
    host: str = ""
    created_at: float = 0.0
    launch_status: str = "LAUNCHING"  # LAUNCHING, LAUNCHED, LAUNCH_FAILED
    launch_error: str = ""
    status_counts: dict[str, int] = attrs.field(factory=dict)  # work units by status
    unreadable: str = ""  # why the stored row could not be read, if it could not

    @property
    def work_unit_count(self) -> int:
        return sum(self.status_counts.values())

    @property
    def status(self) -> Status:
        if self.unreadable:
            return Status.UNKNOWN
        if not self.status_counts:
            return Status.FAILED if self.launch_status == "LAUNCH_FAILED" else Status.LAUNCHING
        status = combine(Status(s) if s in Status.__members__ else Status.UNKNOWN for s in self.status_counts)
        if status is Status.COMPLETED and self.launch_status == "LAUNCH_FAILED":
            return Status.FAILED  # what ran succeeded, but the launch itself did not
        return status

    @property
    def has_active_units(self) -> bool:
        """Whether any work unit may still change. The experiment's own status reads FAILED or
        CANCELLED as soon as one unit does, while others still run: whoever keeps statuses fresh
        (``xcore list``, the dashboard) asks this, not ``status.is_active``."""
        return self.status.is_active or any(
            name not in Status.__members__ or Status(name).is_active for name in self.status_counts)


@datamodel.frozen
class StatusEvent:
    job_id: int
    status: Status
    message: str
    exit_code: int | None
    at: float


@datamodel.frozen
class NewJob:
    """A job as recorded before it is launched."""

    name: str
    executor_kind: str
    executor: dict[str, Any]
    executable: dict[str, Any]
    args: list[str]
    env: dict[str, str]


def unreadable(exc: BaseException) -> str:
    """What a stored record that cannot be read shows instead of its state, with the reason."""
    return f"unreadable record: {type(exc).__name__}: {exc}"


def _elapsed(start: float | None, end: float | None) -> float | None:
    """Seconds from ``start`` to ``end``, or to now while it runs; None before it started."""
    if start is None:
        return None
    return (end if end is not None else time.time()) - start


@datamodel.define(slots=True)
class UnitWrite:
    """What one ``experiment.add`` records: a work unit with its jobs (``role`` set), or more
    jobs of a unit already recorded (``role`` None: a job generator's ``unit.add``), plus the
    jobs' tracker links as ``(index in jobs, name, url)``. ``MetadataStore.record_adds``
    writes many of them in one transaction."""

    experiment_id: int
    work_unit_id: int
    role: str | None
    args: Any
    identity: str
    jobs: list[NewJob]
    links: list[tuple[int, str, str]] = attrs.field(factory=list)
    replace_unlaunched: bool = False  # role None only: an identity relaunch of jobs that never launched
    depends_on: list[DependencyEdge] = attrs.field(factory=list)  # the unit's dependencies (role set)
