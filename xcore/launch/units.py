"""Work units and auxiliary units, their roles and metadata, and the awaitables ``add`` returns.

A unit is a handle on rows of the metadata store: its status, jobs and logs are read from
there (and refreshed from the backends), so a unit works the same in the launching process
and in a later one (``xcore.get_experiment``).
"""

from __future__ import annotations

import concurrent.futures
import enum
import getpass
import os
from collections.abc import Callable, Generator, Mapping
from typing import Any, Protocol

from xcore.errors import ExperimentUnitFailedError, ExperimentUnitNotCompletedError
from xcore.launch import core
from xcore.model import datamodel
from xcore.model.job_blocks import Job, JobGroup
from xcore.model.status import ExperimentUnitStatus, Status, combine
from xcore.runtime.launcher import BatchLauncher
from xcore.store import MetadataStore
from xcore.store.records import ExperimentRecord, JobRecord

# -- roles and annotations -------------------------------------------------------------------


class Importance(enum.Enum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"


@datamodel.frozen
class WorkUnitRole:
    """A unit that is part of the experiment's result."""


@datamodel.frozen
class AuxiliaryUnitRole:
    """A helper unit (e.g. TensorBoard): not counted in the experiment's status, and stopped
    ``termination_delay_secs`` after the work units end."""

    importance: Importance = Importance.NORMAL
    termination_delay_secs: float = 30.0


ExperimentUnitRole = WorkUnitRole | AuxiliaryUnitRole


@datamodel.define
class AuxiliaryUnitJob:
    """Wraps a job to add it as an auxiliary unit: ``experiment.add(AuxiliaryUnitJob(job))``."""

    job: Job | JobGroup
    importance: Importance = Importance.NORMAL
    termination_delay_secs: float = 30.0

    @property
    def role(self) -> AuxiliaryUnitRole:
        return AuxiliaryUnitRole(self.importance, self.termination_delay_secs)


class ContextAnnotations:
    """Title, tags and notes of an experiment; every change is saved at once."""

    def __init__(self, store: MetadataStore, record: ExperimentRecord) -> None:
        self._store, self._record = store, record

    @property
    def title(self) -> str:
        return self._record.title

    @property
    def tags(self) -> list[str]:
        return list(self._record.tags)

    @property
    def notes(self) -> str:
        return self._record.notes

    def set_title(self, title: str) -> None:
        self._store.update_experiment(self._record.id, title=title)
        self._record.title = title

    def add_tags(self, *tags: str) -> None:
        new = self._record.tags + [t for t in tags if t not in self._record.tags]
        self._store.update_experiment(self._record.id, tags=new)
        self._record.tags = new

    def remove_tags(self, *tags: str) -> None:
        new = [t for t in self._record.tags if t not in tags]
        self._store.update_experiment(self._record.id, tags=new)
        self._record.tags = new

    def set_notes(self, notes: str) -> None:
        self._store.update_experiment(self._record.id, notes=notes)
        self._record.notes = notes


class MetadataContext:
    """An experiment's metadata: ``annotations`` (title, tags, notes) and its ``creator``."""

    def __init__(self, annotations: ContextAnnotations, creator: str | None = None) -> None:
        self.annotations = annotations
        self.creator = creator if creator is not None else current_user()


# -- awaitables ------------------------------------------------------------------------------


class LaunchFuture:
    """What ``add`` returns: ignore it in sync code, ``await`` it (or ``.result()``) to get the
    launched unit. Waiting submits anything still queued right away."""

    def __init__(self, future: concurrent.futures.Future, launcher: BatchLauncher, unit: Any) -> None:
        self._future = future
        self._launcher = launcher
        self.unit = unit
        self._cancelled = False

    def result(self, timeout: float | None = None) -> Any:
        if self._cancelled:
            raise concurrent.futures.CancelledError()
        if not self._future.done():
            self._launcher.flush()
        return self._future.result(timeout)

    def done(self) -> bool:
        return self._cancelled or self._future.done()

    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> bool:
        """Cancel this launch, as cancelling XManager's ``add()`` future does: a job generator
        still running is cancelled, jobs not yet handed to a backend never are (they end
        CANCELLED), and whatever the unit already started is stopped. The experiment's block
        then ends as usual, counting the cancelled launch as XManager does. Returns False if the
        launch had already finished (nothing is cancelled then)."""
        if self._cancelled:
            return True
        if self._future.done():
            return False
        self._cancelled = True
        owner = getattr(self.unit, "experiment", None)
        cancel_launch = getattr(owner, "cancel_launch", None)
        if cancel_launch is not None:
            cancel_launch(self.unit, self._future)
        else:  # a unit of another owner: cancel what can be
            self._future.cancel()
        return True

    def __await__(self) -> Generator[Any, None, Any]:
        import asyncio  # only async scripts await: plain ones never import it

        if self._cancelled:
            raise asyncio.CancelledError()
        if not self._future.done():
            yield from asyncio.get_running_loop().run_in_executor(None, self._launcher.flush).__await__()
        return (yield from asyncio.wrap_future(self._future).__await__())


class WorkUnitCompletedAwaitable:
    """``wu.wait_until_complete()``: await it, or call ``.result()`` from sync code."""

    def __init__(self, unit: ExperimentUnit) -> None:
        self.work_unit = unit

    def result(self, timeout: float | None = None) -> ExperimentUnit:
        return self.work_unit._wait(timeout)

    def __await__(self) -> Generator[Any, None, ExperimentUnit]:
        import asyncio

        return (yield from asyncio.get_running_loop().run_in_executor(None, self.result).__await__())


# -- units -----------------------------------------------------------------------------------


class UnitOwner(Protocol):
    """What a unit asks of its experiment (``Experiment`` is one). The experiment module builds
    on this one, so units name what they need here instead of importing it."""

    @property
    def experiment_id(self) -> int: ...

    @property
    def context(self) -> MetadataContext: ...

    def add_jobs(self, unit: ExperimentUnit, job: Job | JobGroup, args: Mapping[str, Any] | None) -> LaunchFuture:
        """Record and queue ``job`` as part of ``unit`` (a job generator's ``work_unit.add``)."""
        ...

    def unit_jobs(self, unit_id: int) -> list[JobRecord]:
        """The recorded jobs of one unit."""
        ...

    def refresh_jobs(self, jobs: list[JobRecord]) -> list[JobRecord]:
        """Submit what is queued, then ask the backends for ``jobs``' states."""
        ...

    def wait_for_jobs(self, jobs: Callable[[], list[JobRecord]], timeout: float | None) -> list[JobRecord]:
        """Submit what is queued, then wait until ``jobs()`` have all ended."""
        ...

    def cancel_jobs(self, jobs: list[JobRecord]) -> None:
        """Submit what is queued, then cancel ``jobs``."""
        ...


class ExperimentUnit:
    """One work unit or auxiliary unit of an experiment."""

    def __init__(self, experiment: UnitOwner, unit_id: int, role: ExperimentUnitRole, args: Any, *,
                 identity: str = "", job_names: tuple[str, ...] = ()) -> None:
        self.experiment = experiment
        self.experiment_id = experiment.experiment_id
        self._id = unit_id
        self.role = role
        self.args = args
        self._job_names = job_names  # its jobs' names (a tuple: no set per unit in a sweep)
        self._identity = identity

    @property
    def work_unit_id(self) -> int:
        return self._id

    @property
    def experiment_unit_name(self) -> str:
        return f"{self.experiment_id}_{self._id}"

    @property
    def context(self) -> MetadataContext:
        return self.experiment.context

    def get_full_job_name(self, job_name: str) -> str:
        """A job's name made unique across experiments and units: ``{xid}_{unit}_{job}``."""
        return f"{self.experiment_unit_name}_{job_name}"

    @property
    def identity(self) -> str:
        """The identity given to ``experiment.add(..., identity=...)``, else ''."""
        return self._identity

    @property
    def job_names(self) -> tuple[str, ...]:
        """The names of the jobs added to this unit so far (a job generator may add more)."""
        return self._job_names

    def note_job_names(self, names: tuple[str, ...]) -> None:
        """Remember the names of jobs just added, so a later ``add`` cannot reuse them."""
        self._job_names += names

    def job(self, name: str) -> UnitJob:
        """One job of this unit (a JobGroup's member, by name), for ``experiment.add(..., depends_on=[...])``."""
        if name not in self._job_names:
            known = ", ".join(self._job_names) or "none yet"
            raise ValueError(f"work unit {self.experiment_unit_name} has no job {name!r} (its jobs: {known}).")
        return UnitJob(self, name)

    def add(self, job: Job | JobGroup, args: Mapping[str, Any] | None = None, *, identity: str = "") -> LaunchFuture:
        """Add jobs to this unit (from inside a job generator). ``identity`` is accepted for
        XManager compatibility; units, not jobs, are deduplicated by identity in xcore."""
        return self.experiment.add_jobs(self, job, args)

    def _jobs(self) -> list[JobRecord]:
        return self.experiment.unit_jobs(self._id)

    def get_status(self) -> ExperimentUnitStatus:
        jobs = self.experiment.refresh_jobs(self._jobs())
        status = combine(j.status for j in jobs)
        messages = [f"{j.name}: {j.message}" for j in jobs if j.message and j.status is status]
        return ExperimentUnitStatus(status, "; ".join(messages))

    @property
    def launched_jobs(self) -> list[core.LaunchedJob]:
        """One ``LaunchedJob`` (name, backend address, log location) per submitted job."""
        return [
            core.LaunchedJob(name=j.name, address=_address(j.handle), logs=j.log_path)
            for j in self._jobs() if j.handle is not None
        ]

    def wait_until_complete(self) -> WorkUnitCompletedAwaitable:
        return WorkUnitCompletedAwaitable(self)

    def _wait(self, timeout: float | None) -> ExperimentUnit:
        jobs = self.experiment.wait_for_jobs(self._jobs, timeout)
        status = combine(j.status for j in jobs)
        details = "; ".join(
            f"job {j.name}: {j.message or j.status.value}" for j in jobs if j.status is not Status.COMPLETED)
        if status is Status.FAILED:
            raise ExperimentUnitFailedError(f"Work unit {self.experiment_unit_name} failed: {details}")
        if status is not Status.COMPLETED:
            raise ExperimentUnitNotCompletedError(
                f"Work unit {self.experiment_unit_name} ended {status.value}: {details}")
        return self

    def stop(
        self, *, mark_as_failed: bool = False, mark_as_completed: bool = False, message: str | None = None,
    ) -> None:
        """Cancel every job of this unit. The ``mark_as_*`` flags are accepted for XManager compatibility."""
        self.experiment.cancel_jobs(self._jobs())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(experiment_id={self.experiment_id}, work_unit_id={self._id})"


class UnitJob:
    """One named job of a unit, as ``depends_on`` names it (``unit.job("train")``)."""

    __slots__ = ("name", "unit")

    def __init__(self, unit: ExperimentUnit, name: str) -> None:
        self.unit, self.name = unit, name

    def __repr__(self) -> str:
        return f"UnitJob({self.unit!r}, {self.name!r})"


class WorkUnit(ExperimentUnit):
    pass


class AuxiliaryUnit(ExperimentUnit):
    pass


def _address(handle: Mapping[str, Any] | None) -> str | None:
    """The backend's own id for a job, from its stored handle, as text."""
    if not handle:
        return None
    for key in ("job_id", "container_id", "pid", "id"):
        if handle.get(key) is not None:
            return str(handle[key])
    return None


def current_user() -> str:
    """Who launches: recorded as an experiment's user and its metadata's ``creator``."""
    try:
        return getpass.getuser()
    except Exception:
        return str(os.getuid()) if hasattr(os, "getuid") else ""
