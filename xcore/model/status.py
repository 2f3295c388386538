"""One status vocabulary for every backend, and how job statuses add up to a unit's."""

from __future__ import annotations

import enum
from collections.abc import Iterable

from xcore.model import datamodel


class Status(enum.Enum):
    """Where a job is in its life. Backends map their own states onto these."""

    LAUNCHING = "LAUNCHING"  # recorded, not yet accepted by the backend
    PENDING = "PENDING"  # accepted, waiting for resources
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    UNKNOWN = "UNKNOWN"  # the backend cannot be asked (plugin missing, host unreachable)

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def is_active(self) -> bool:
        return self in (Status.LAUNCHING, Status.PENDING, Status.RUNNING)

    def __str__(self) -> str:
        return self.value


_TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})


FAILURE_CLASSES = ("preempted", "node_failure", "timeout", "out_of_memory", "error", "lost", "launch")
"""Why a job (or one attempt of it) failed, as ``JobState.failure`` says: the scheduler took the
node back (``preempted``), the node died (``node_failure``), a time limit (``timeout``), the
memory limit or OOM killer (``out_of_memory``), the program's own exit code (``error``), the
backend forgot the job (``lost``), it never started (``launch``). See ``xcore.model.retry``."""


@datamodel.frozen
class Attempt:
    """One run of a job that ended (or, the newest, still runs): attempts are numbered from 1
    and the store keeps each as history, never overwritten."""

    number: int
    status: Status
    failure: str | None = None
    exit_code: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    message: str = ""


@datamodel.frozen
class JobState:
    """What a backend reports about one job.

    ``message`` says why (``"pending: Resources"``, ``"exit code 3"``); ``exit_code`` is the
    program's own exit code when known; times are UNIX seconds when the backend knows them.

    Retries (``xcore.model.retry``): ``failure`` is the class of a FAILED job (one of
    ``FAILURE_CLASSES``; a plugin that reports none reads ``error``); ``attempt`` is the attempt
    the backend is on, 1-based, when it counts them (a Slurm requeue, xlocal's runner respawn);
    ``previous_attempts`` the earlier attempts the backend knows of (``sacct --duplicates``),
    which the store merges by number into the job's history.
    """

    status: Status
    message: str = ""
    exit_code: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    failure: str | None = None
    attempt: int | None = None
    previous_attempts: tuple[Attempt, ...] = ()


def recorded_times(state: JobState, started: float | None, ended: float | None,
                   now: float) -> tuple[float | None, float | None]:
    """The start and end recorded for a job that had ``started``/``ended`` and now reports
    ``state``. Both stores and the in-memory records of a status refresh use it, so a job
    returned by ``wait_until_complete`` carries the times the store holds. A job cancelled
    before it ever ran has no start (and so no duration); a job first seen after it ended
    never gets a negative duration."""
    if started is None:
        started = state.started_at
    if started is None and (state.status is Status.RUNNING
                            or (state.status.is_terminal and state.status is not Status.CANCELLED)):
        started = now
    if state.status.is_terminal and ended is None:
        ended = state.ended_at or now
    if started is not None and ended is not None and started > ended:
        started = ended
    return started, ended


_LAUNCH_CANCELLED = "the launch was cancelled"
CANCELLED_AT_LAUNCH = f"not launched: {_LAUNCH_CANCELLED}"
"""The message of a job that ``experiment.add(...).cancel()`` kept from running."""
STOPPED_AT_LAUNCH = f"stopped: {_LAUNCH_CANCELLED}"
"""The message of a job that had started when its ``experiment.add(...)`` was cancelled."""


def cancelled_by_launch(status: Status, message: str) -> bool:
    """A job the launch script itself cancelled (``experiment.add(...).cancel()``), as XManager
    ignores cancelled launches: not a failure for ``xcore wait``."""
    return status is Status.CANCELLED and message in (CANCELLED_AT_LAUNCH, STOPPED_AT_LAUNCH)


COMBINE_ORDER = (Status.FAILED, Status.CANCELLED, Status.UNKNOWN, Status.RUNNING, Status.PENDING, Status.LAUNCHING)
"""Which job status decides a work unit's, first to last (then COMPLETED): ``combine``'s order,
also written as SQL by ``xcore.store.statements``."""


def combine(statuses: Iterable[Status]) -> Status:
    """A work unit's status from its jobs': a failure wins, then cancellation, then activity."""
    seen = set(statuses)
    if not seen:
        return Status.LAUNCHING
    for status in COMBINE_ORDER:
        if status in seen:
            return status
    return Status.COMPLETED


class ExperimentUnitStatus:
    """XManager's status interface for a work unit: ``is_active``, ``is_completed``, ``is_failed``."""

    def __init__(self, status: Status, message: str = "") -> None:
        self.status = status
        self._message = message

    @property
    def is_active(self) -> bool:
        return self.status.is_active

    @property
    def is_completed(self) -> bool:
        return self.status is Status.COMPLETED

    @property
    def is_failed(self) -> bool:
        return self.status is Status.FAILED

    @property
    def is_cancelled(self) -> bool:
        return self.status is Status.CANCELLED

    @property
    def message(self) -> str:
        return self._message

    def __repr__(self) -> str:
        return f"ExperimentUnitStatus({self.status.value}{', ' + repr(self._message) if self._message else ''})"


WorkUnitStatus = ExperimentUnitStatus
