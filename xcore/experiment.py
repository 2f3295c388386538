"""Experiments and work units: XManager's launch API, backed by the metadata store.

``create_experiment`` works the same from sync and async launch scripts::

    with xcore.create_experiment("sweep") as experiment:
        for lr in (0.1, 0.01):
            experiment.add(xcore.Job(executable, executor, args={"lr": lr}))

``add`` records the work unit at once (ids start at 1, in call order) and returns an
awaitable; the launch itself is batched (see ``launcher``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import getpass
import hashlib
import inspect
import os
import socket
import sys
import threading
import time
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from xcore import core, paths, vcs
from xcore.args import SequentialArgs
from xcore.errors import (
    ConfigurationError,
    DebugInterrupt,
    ExperimentUnitError,
    ExperimentUnitFailedError,
    ExperimentUnitNotCompletedError,
)
from xcore.execution import LaunchRequest, PackagingContext
from xcore.job_blocks import Executable, Job, JobConfig, JobGroup, Packageable, job_args_with_overrides
from xcore.launcher import INTERRUPTED, BatchLauncher, LazyFuture, PendingJob, UnitTicket
from xcore.plugins import PluginHost, get_host
from xcore.progress import Progress
from xcore.records import ExperimentRecord, JobRecord, NewJob
from xcore.redaction import redact_env, redact_nested
from xcore.status import ExperimentUnitStatus, Status, combine
from xcore.store import MetadataStore
from xcore.tracking import load_handles, refresh_jobs, wait_for
from xcore.validation import check_field_types

# -- roles and annotations -------------------------------------------------------------------


class Importance(enum.Enum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"


@attrs.frozen
class WorkUnitRole:
    """A unit that is part of the experiment's result."""


@attrs.frozen
class AuxiliaryUnitRole:
    """A helper unit (e.g. TensorBoard): not counted in the experiment's status, and stopped
    ``termination_delay_secs`` after the work units end."""

    importance: Importance = Importance.NORMAL
    termination_delay_secs: float = 30.0


ExperimentUnitRole = WorkUnitRole | AuxiliaryUnitRole


@attrs.define
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
        self.creator = creator if creator is not None else _user()


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
        still running is cancelled, and whatever the unit already submitted is stopped.
        Returns False if the launch had already finished (nothing is cancelled then)."""
        if self._cancelled:
            return True
        if self._future.done():
            return False
        self._cancelled = True
        self._future.cancel()  # a job generator's task; a plain unit's future is not cancellable
        if hasattr(self.unit, "stop"):
            self.unit.stop()
        return True

    def __await__(self) -> Generator[Any, None, Any]:
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
        return (yield from asyncio.get_running_loop().run_in_executor(None, self.result).__await__())


# -- units -----------------------------------------------------------------------------------


class ExperimentUnit:
    """One work unit or auxiliary unit of an experiment."""

    def __init__(self, experiment: Experiment, unit_id: int, role: ExperimentUnitRole, args: Any) -> None:
        self.experiment = experiment
        self.experiment_id = experiment.experiment_id
        self._id = unit_id
        self.role = role
        self.args = args
        self._job_names: set[str] = set()
        self._identity = ""

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

    def add(self, job: Job | JobGroup, args: Mapping[str, Any] | None = None, *, identity: str = "") -> LaunchFuture:
        """Add jobs to this unit (from inside a job generator). ``identity`` is accepted for
        XManager compatibility; units, not jobs, are deduplicated by identity in xcore."""
        return self.experiment._add_jobs(self, job, args)

    def _jobs(self) -> list[JobRecord]:
        units = self.experiment._store.work_units(self.experiment_id, [self._id])
        return units[0].jobs if units else []

    def get_status(self) -> ExperimentUnitStatus:
        self.experiment._launcher.flush()
        jobs = refresh_jobs(self.experiment._store, self.experiment._host, self._jobs())
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
        self.experiment._launcher.flush()
        jobs = wait_for(self._jobs, self.experiment._store, self.experiment._host, timeout=timeout)
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
        self.experiment._launcher.flush()
        cancel_jobs(self.experiment._store, self.experiment._host, self._jobs())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(experiment_id={self.experiment_id}, work_unit_id={self._id})"


class WorkUnit(ExperimentUnit):
    pass


class AuxiliaryUnit(ExperimentUnit):
    pass


# -- experiment ------------------------------------------------------------------------------


class Experiment:
    """A titled set of work units, recorded in the metadata store."""

    def __init__(self, record: ExperimentRecord, store: MetadataStore, host: PluginHost, next_unit_id: int = 1) -> None:
        self._record = record
        self._store = store
        self._host = host
        self._progress = Progress()
        self._launcher = BatchLauncher(store, host, self._progress, record.title, ExperimentUnitError, record.id)
        self._units: dict[int, ExperimentUnit] = {}
        self._identities: dict[str, ExperimentUnit] = {}
        self._next_id = next_unit_id
        self._id_lock = threading.Lock()
        self._dump_cache: dict[int, tuple[object, dict[str, Any]]] = {}
        self._checked_executors: dict[int, object] = {}  # kept alive so ids stay unique
        self._generator_loop: asyncio.AbstractEventLoop | None = None
        self._owns_generator_loop = False
        self._context_tokens: list[Any] = []
        self._generator_tasks: list[concurrent.futures.Future] = []
        self._flush_scheduled: set[int] = set()  # event loops with a flush queued (see _schedule_flush)
        self.context = MetadataContext(ContextAnnotations(store, record))

    # identity
    @property
    def experiment_id(self) -> int:
        return self._record.id

    @property
    def work_unit_count(self) -> int:
        return sum(isinstance(u, WorkUnit) for u in self._units.values())

    @property
    def work_units(self) -> dict[int, ExperimentUnit]:
        return {i: u for i, u in self._units.items() if isinstance(u, WorkUnit)}

    # context management, sync and async
    def __enter__(self) -> Experiment:
        if _in_coroutine():
            raise RuntimeError("When using an experiment from a coroutine use `async with`, not `with`.")
        self._context_tokens.append(core._current_experiment.set(self))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._reset_context()
        self._finish(exc)

    async def __aenter__(self) -> Experiment:
        # Job generators run on this loop, the script's own, as in XManager.
        self._generator_loop = asyncio.get_running_loop()
        self._context_tokens.append(core._current_experiment.set(self))
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._reset_context()
        if self._generator_tasks:
            await asyncio.gather(*(asyncio.wrap_future(t) for t in list(self._generator_tasks)),
                                 return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, self._finish, exc)

    def _reset_context(self) -> None:
        if self._context_tokens:
            token = self._context_tokens.pop()
            try:
                core._current_experiment.reset(token)
            except ValueError:  # exited in another context (e.g. another task): just clear it
                core._current_experiment.set(None)

    def _finish(self, exc: BaseException | None) -> None:
        if self._launcher.submitted and self.experiment_id not in created_experiment_ids:
            created_experiment_ids.append(self.experiment_id)  # reopened and added to: `launch --wait` waits for it
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C or SIGTERM: stop submitting, keep what was submitted
            for task in self._generator_tasks:
                task.cancel()
            dropped = self._launcher.abort(INTERRUPTED)
            self._progress.clear()
            if dropped:
                self._progress.message(f"interrupted: {dropped} queued jobs of experiment {self.experiment_id} "
                                       "were not launched (recorded as cancelled).")
        else:
            for task in self._generator_tasks:
                if task.cancelled():  # launch.cancel(): ignored, as XManager ignores cancelled tasks
                    continue
                try:
                    task.result()
                except BaseException as task_error:  # recorded below, first error re-raised
                    self._launcher.errors.append(task_error)
            self._launcher.close()
        self._progress.clear()
        if self._generator_loop is not None and self._owns_generator_loop:
            self._generator_loop.call_soon_threadsafe(self._generator_loop.stop)
        error = exc or (self._launcher.errors[0] if self._launcher.errors else None)
        try:
            if error is not None:
                self._store.update_experiment(
                    self.experiment_id, launch_status="LAUNCH_FAILED",
                    launch_error=f"{type(error).__name__}: {error}" if str(error) else type(error).__name__,
                )
            else:
                self._store.update_experiment(self.experiment_id, launch_status="LAUNCHED")
        except Exception as store_error:  # the store is failing: say so, never hide the launch's own error
            self._progress.message(f"error: could not record the launch status of experiment "
                                   f"{self.experiment_id}: {type(store_error).__name__}: {store_error}")
            if error is None:
                raise ExperimentUnitError(
                    f"Recording experiment {self.experiment_id} failed: {store_error}") from store_error
        if not self._units and exc is None:
            self._progress.message(f"warning: experiment {self.experiment_id} has no work units.")
        if exc is None and self._launcher.errors:
            raise self._launcher.errors[0]

    # packaging
    def package(self, packageables: Sequence[Packageable] = ()) -> list[Executable]:
        """Package specs for their executors, each distinct one once."""
        return package(packageables, host=self._host, progress=self._progress)

    async def package_async(self, packageable: Packageable) -> Executable:
        loop = asyncio.get_running_loop()
        [executable] = await loop.run_in_executor(None, self.package, [packageable])
        return executable

    # adding work
    def add(
        self,
        job: Job | JobGroup | JobConfig | AuxiliaryUnitJob | Any,
        args: Mapping[str, Any] | None = None,
        *,
        role: ExperimentUnitRole = WorkUnitRole(),
        identity: str = "",
    ) -> LaunchFuture:
        """Add a work unit (or an auxiliary unit) and queue its jobs for launch."""
        if isinstance(job, AuxiliaryUnitJob):
            role, job = job.role, job.job
        if isinstance(job, JobConfig):  # e.g. an array job: one unit with its expanded jobs
            job = job.expand()
        if identity and identity in self._identities:
            existing = self._identities[identity]
            if not self._never_launched(existing):
                done: concurrent.futures.Future = concurrent.futures.Future()
                done.set_result(existing)
                return LaunchFuture(done, self._launcher, existing)
            if isinstance(job, (Job, JobGroup)):  # it never reached a backend: run it now
                prepared = self._prepare(job, args, prefix="")
                return self._record_and_queue(existing, prepared, None, None, "", replace_unlaunched=True)
        is_generator = _is_async_callable(job)
        if not is_generator and callable(job) and not isinstance(job, (Job, JobGroup)):
            raise ValueError(f"Job generators must be `async def` functions; {job!r} is not.")
        if not is_generator and not isinstance(job, (Job, JobGroup)):
            raise TypeError(
                "experiment.add takes a Job, JobGroup, AuxiliaryUnitJob or async job generator,"
                f" got {type(job).__name__}."
            )
        if isinstance(job, (Job, JobGroup)):  # not a generator (anything else was refused above)
            # Validate everything before anything is recorded, so a bad job records nothing.
            prepared = self._prepare(job, args, prefix="")
        with self._id_lock:
            unit_id = self._next_id
            self._next_id += 1
        unit_cls = AuxiliaryUnit if isinstance(role, AuxiliaryUnitRole) else WorkUnit
        unit = unit_cls(self, unit_id, role, args)
        role_name = "auxiliary" if unit_cls is AuxiliaryUnit else "work_unit"
        unit_args = _jsonable_unit_args(job, args) if isinstance(job, (Job, JobGroup)) else _jsonable(args)
        stored_args = redact_nested(unit_args)
        self._units[unit_id] = unit
        if identity:
            self._identities[identity] = unit
            unit._identity = identity
        if is_generator:
            self._store.add_work_unit(self.experiment_id, unit_id, role_name, stored_args, identity, [])
            future = self._run_generator(job, unit, dict(args or {}))
            return LaunchFuture(future, self._launcher, unit)
        return self._record_and_queue(unit, prepared, role_name, stored_args, identity)

    def _never_launched(self, unit: ExperimentUnit) -> bool:
        """A unit from an earlier launch whose jobs all ended without reaching a backend (the
        launcher was killed or interrupted first)."""
        jobs = unit._jobs()
        return bool(jobs) and all(j.handle is None and j.status.is_terminal for j in jobs)

    def _add_jobs(self, unit: ExperimentUnit, job: Job | JobGroup, args: Mapping[str, Any] | None) -> LaunchFuture:
        if isinstance(job, JobConfig):
            job = job.expand()
        prepared = self._prepare(job, args, prefix="", taken=unit._job_names)
        return self._record_and_queue(unit, prepared, None, None, "")

    def _record_and_queue(
        self, unit: ExperimentUnit, prepared: list[tuple[str, Job, SequentialArgs, dict[str, str]]],
        role_name: str | None, stored_args: Any, identity: str, replace_unlaunched: bool = False,
    ) -> LaunchFuture:
        from xcore.trackers import TrackedJob, job_tracking

        links: list[tuple[int, str, str]] = []  # (index in prepared, name, url) until ids are known
        tracked = []
        for index, (name, job, argv, env) in enumerate(prepared):
            extra = job_tracking(self._host, TrackedJob(
                self.experiment_id, self._record.title, tuple(self._record.tags), unit.work_unit_id, name,
                unit.args, env, os.environ))
            links += [(index, link_name, url) for link_name, url in extra.links.items()]
            tracked.append((name, job, argv, {**extra.env, **env}) if extra.env else (name, job, argv, env))
        prepared = tracked
        new_jobs = [
            NewJob(
                name=name,
                executor_kind=self._host.kinds.kind_of(job.executor),
                executor=self._dump(job.executor),
                executable=self._dump(job.executable),
                args=argv.to_argv(),
                env=redact_env(env),
            )
            for name, job, argv, env in prepared
        ]
        lease = self._launcher.lease_id()
        with self._store.transaction():  # the unit, its jobs and their links: one commit, before add returns
            if role_name is None:
                job_ids = self._store.add_jobs(self.experiment_id, unit.work_unit_id, new_jobs, lease_id=lease,
                                               replace_unlaunched=replace_unlaunched)
            else:
                job_ids = self._store.add_work_unit(self.experiment_id, unit.work_unit_id, role_name, stored_args,
                                                    identity, new_jobs, lease_id=lease)
            if links:
                self._store.record_links([(job_ids[index], name, url) for index, name, url in links])
        unit._job_names.update(name for name, *_ in prepared)
        future: concurrent.futures.Future = LazyFuture()
        ticket = UnitTicket(future, unit, len(prepared))
        self._launcher.submit(
            [
                PendingJob(
                    LaunchRequest(job_id, self.experiment_id, unit.work_unit_id, name, job.executable, job.executor,
                                  new_job.args, env),
                    new_job.executor_kind,
                    ticket,
                )
                for job_id, new_job, (name, job, _argv, env) in zip(job_ids, new_jobs, prepared, strict=True)
            ]
        )
        self._schedule_flush()
        return LaunchFuture(future, self._launcher, unit)

    def _schedule_flush(self) -> None:
        """Added from a running event loop (an async script, a job generator): submit once
        that loop gets control back, i.e. at the next ``await`` that suspends."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if id(loop) in self._flush_scheduled:
            return
        self._flush_scheduled.add(id(loop))

        def flush() -> None:
            self._flush_scheduled.discard(id(loop))
            self._launcher.request_flush()

        loop.call_soon(flush)

    def _prepare(
        self, job: Job | JobGroup, args: Mapping[str, Any] | None, prefix: str, taken: set[str] | None = None
    ) -> list[tuple[str, Job, SequentialArgs, dict[str, str]]]:
        """Flatten a job or group into (name, job, final args, env), validating kinds and args."""
        taken = set() if taken is None else set(taken)
        if isinstance(job, Job):
            argv, env = job_args_with_overrides(job, args)
            self._host.kinds.kind_of(job.executor)  # unknown executor: a clear error before recording
            if id(job.executor) not in self._checked_executors:  # also executors that skip the base check
                check_field_types(job.executor)
                self._checked_executors[id(job.executor)] = job.executor
            name = prefix or job.name or job.executable.name
            base, n = name, 1
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            return [(name, job, argv, env)]
        if isinstance(job, JobGroup):
            args = dict(args or {})
            unknown = set(args) - set(job.jobs)
            if unknown:
                raise ValueError(
                    f"args for a JobGroup are keyed by job name {sorted(job.jobs)}; unknown: {sorted(unknown)}.")
            prepared: list[tuple[str, Job, SequentialArgs, dict[str, str]]] = []
            for key, member in job.jobs.items():
                entries = self._prepare(member, args.get(key), f"{prefix}_{key}" if prefix else key, taken)
                taken.update(name for name, *_ in entries)
                prepared += entries
            return prepared
        raise TypeError(f"Expected a Job or JobGroup, got {type(job).__name__}.")

    def _dump(self, obj: object) -> dict[str, Any]:
        cached = self._dump_cache.get(id(obj))
        if cached is None or cached[0] is not obj:
            cached = (obj, redact_nested(self._host.serializer.dump(obj)))  # as stored: secrets redacted
            self._dump_cache[id(obj)] = cached
        return cached[1]

    def _run_generator(self, generator: Any, unit: ExperimentUnit, kwargs: dict[str, Any]) -> concurrent.futures.Future:
        if self._generator_loop is None or self._generator_loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="xcore-generators", daemon=True).start()
            self._generator_loop = loop
            self._owns_generator_loop = True

        async def run() -> ExperimentUnit:
            core._current_experiment.set(self)
            core._current_experiment_unit.set(unit)
            try:
                await generator(unit, **kwargs)
            except DebugInterrupt:  # XManager: stop this unit, keep the experiment going
                unit.stop(message="Launch interrupted by debug mode.")
            return unit

        task = asyncio.run_coroutine_threadsafe(run(), self._generator_loop)
        self._generator_tasks.append(task)
        return task

    # status
    def _all_jobs(self, include_auxiliary: bool = False) -> list[JobRecord]:
        return [
            job
            for unit in self._store.work_units(self.experiment_id)
            if include_auxiliary or unit.role == "work_unit"
            for job in unit.jobs
        ]

    def get_status(self) -> ExperimentUnitStatus:
        self._launcher.flush()
        jobs = refresh_jobs(self._store, self._host, self._all_jobs())
        units: dict[int, list[Status]] = {}
        for job in jobs:
            units.setdefault(job.work_unit_id, []).append(job.status)
        return ExperimentUnitStatus(combine(combine(s) for s in units.values()) if units else Status.LAUNCHING)

    def wait_until_complete(self, timeout: float | None = None) -> list[JobRecord]:
        """Block until every work unit has ended, then stop auxiliary units."""
        self._launcher.flush()
        jobs = wait_for(self._all_jobs, self._store, self._host, timeout=timeout)
        auxiliary = [u for u in self._units.values() if isinstance(u.role, AuxiliaryUnitRole)]
        if auxiliary:
            time.sleep(max(u.role.termination_delay_secs for u in auxiliary if isinstance(u.role, AuxiliaryUnitRole)))
            for unit in auxiliary:
                unit.stop()
        return jobs

    def stop(self) -> None:
        """Cancel every unit of the experiment."""
        self._launcher.flush()
        cancel_jobs(self._store, self._host, self._all_jobs(include_auxiliary=True))


def _in_coroutine() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _is_async_callable(job: Any) -> bool:
    if isinstance(job, (Job, JobGroup, JobConfig)):
        return False
    return (
        inspect.iscoroutinefunction(job) or inspect.isasyncgenfunction(job)
        or (callable(job) and inspect.iscoroutinefunction(type(job).__call__))
    )


def _address(handle: Mapping[str, Any] | None) -> str | None:
    """The backend's own id for a job, from its stored handle, as text."""
    if not handle:
        return None
    for key in ("job_id", "container_id", "pid", "id"):
        if handle.get(key) is not None:
            return str(handle[key])
    return None


def cancel_jobs(store: MetadataStore, host: PluginHost, jobs: Sequence[JobRecord]) -> int:
    """Cancel the active jobs among ``jobs``, batched per backend; return how many."""
    by_kind: dict[str, list[tuple[JobRecord, Any]]] = {}
    active = [j for j in refresh_jobs(store, host, list(jobs))
              if j.status.is_active and j.handle_kind and j.handle is not None]
    for job, handle in load_handles(host, active):
        by_kind.setdefault(job.handle_kind or "", []).append((job, handle))
    for kind, pairs in by_kind.items():
        host.cancel(kind, [handle for _, handle in pairs])
    refresh_jobs(store, host, [j for pairs in by_kind.values() for j, _ in pairs])
    return sum(len(p) for p in by_kind.values())


# -- module-level entry points ---------------------------------------------------------------

_launch_script: Path | None = None
created_experiment_ids: list[int] = []  # in this process, so `xcore launch` can report them


def set_launch_script(path: Path | None) -> None:
    """Called by ``xcore launch`` so experiments record which script created them."""
    global _launch_script
    _launch_script = path
    paths.set_launch_script(path)  # relative paths in the script are taken from its directory


def _script_path() -> Path | None:
    if _launch_script is not None:
        return _launch_script
    candidate = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    return candidate.resolve() if candidate and candidate.is_file() else None


def open_store(host: PluginHost | None = None) -> MetadataStore:
    return (host or get_host()).open_store(paths.store_url())


def create_experiment(
    experiment_title: str | None = None, *, tags: Sequence[str] = (), notes: str = "", title: str | None = None
) -> Experiment:
    """Start a new experiment. Backend-neutral: each job's executor picks its backend."""
    running = paths.launch_script()
    if running is not None and paths.stdlib_shadowing(running):  # `python secrets.py`
        raise ConfigurationError(paths.stdlib_shadowing(running))
    host = get_host()
    store = open_store(host)
    script = _script_path()
    git = vcs.git_state(script.parent if script else Path.cwd())
    record = store.create_experiment(
        title or experiment_title or (script.stem if script else "experiment"),
        tags=list(tags),
        notes=notes,
        script_path=str(script) if script else None,
        script_sha256=hashlib.sha256(script.read_bytes()).hexdigest() if script else None,
        git_commit=git.commit if git else None,
        git_dirty=git.dirty if git else None,
        user=_user(),
        host=socket.gethostname(),
    )
    created_experiment_ids.append(record.id)
    return Experiment(record, store, host)


def get_experiment(experiment_id: int) -> Experiment:
    """Reopen a recorded experiment to inspect it or add more work units."""
    from xcore.orphans import resolve_orphans

    host = get_host()
    store = open_store(host)
    record = store.get_experiment(int(experiment_id))
    resolve_orphans(store, host)  # a killed launcher's units become relaunchable by identity
    units = store.work_units(record.id)
    experiment = Experiment(record, store, host, next_unit_id=max((u.id for u in units), default=0) + 1)
    for stored in units:
        cls = AuxiliaryUnit if stored.role == "auxiliary" else WorkUnit
        role: ExperimentUnitRole = AuxiliaryUnitRole() if cls is AuxiliaryUnit else WorkUnitRole()
        unit = cls(experiment, stored.id, role, stored.args)
        unit._job_names = {j.name for j in stored.jobs}
        experiment._units[stored.id] = unit
        if stored.identity:
            experiment._identities[stored.identity] = unit
            unit._identity = stored.identity
    return experiment


def list_experiments(*, status: str | None = None, title: str | None = None, tag: str | None = None,
                     limit: int | None = 20) -> list[ExperimentRecord]:
    return open_store().list_experiments(status=status, title=title, tag=tag, limit=limit)


def package(packageables: Sequence[Packageable], *, host: PluginHost | None = None,
            progress: Progress | None = None) -> list[Executable]:
    """Package each distinct packageable once, in order."""
    host = host or get_host()
    progress = progress or Progress()
    context = PackagingContext(paths.home() / "cache", progress)
    done: list[tuple[Packageable, Executable]] = []
    result = []
    for index, packageable in enumerate(packageables, 1):
        match = next((exe for p, exe in done if p == packageable), None)
        if match is None:
            progress.update("packaging", index, len(packageables), packageable.executable_spec.name)
            match = host.package(packageable, context)
            done.append((packageable, match))
        result.append(match)
    progress.clear()
    return result


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return str(os.getuid()) if hasattr(os, "getuid") else ""


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, SequentialArgs):
        return _jsonable(value.to_stored())
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)


def _jsonable_unit_args(job: Job | JobGroup, args: Mapping[str, Any] | None) -> Any:
    """What ``xcore show`` lists as a unit's args: the add() overrides, else the job's own args."""
    if args:
        return _jsonable(args)
    if isinstance(job, Job):
        return _jsonable(job.args.to_stored())
    return {name: _jsonable_unit_args(member, None) for name, member in job.jobs.items()}

