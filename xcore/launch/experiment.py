"""An experiment: XManager's launch API, backed by the metadata store.

``create_experiment`` works the same from sync and async launch scripts::

    with xcore.create_experiment("sweep") as experiment:
        for lr in (0.1, 0.01):
            experiment.add(xcore.Job(executable, executor, args={"lr": lr}))

``add`` gives the work unit its id at once (ids start at 1, in call order) and returns an
awaitable; its records are committed in groups (``xcore.runtime.recorder``), at the latest
when the awaitable resolves, the block ends, or its jobs are launched; the launch itself is
batched (``xcore.runtime.launcher``). Units are in
``units``; creating and reopening experiments in ``registry``.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from xcore.errors import DebugInterrupt, ExperimentUnitError
from xcore.hooks.host import PluginHost
from xcore.launch import core
from xcore.launch.units import (
    AuxiliaryUnit,
    AuxiliaryUnitJob,
    AuxiliaryUnitRole,
    ContextAnnotations,
    ExperimentUnit,
    ExperimentUnitRole,
    LaunchFuture,
    MetadataContext,
    UnitJob,
    WorkUnit,
    WorkUnitRole,
)
from xcore.model import limits
from xcore.model.args import SequentialArgs
from xcore.model.dependencies import WHEN, DependencyEdge, find_cycle
from xcore.model.job_blocks import (
    Executable,
    Job,
    JobConfig,
    JobGroup,
    Packageable,
    check_job,
    job_args_with_overrides,
)
from xcore.model.retry import DEFAULT_RETRY, Retry
from xcore.model.status import (
    CANCELLED_AT_LAUNCH,
    STOPPED_AT_LAUNCH,
    ExperimentUnitStatus,
    JobState,
    Status,
    combine,
)
from xcore.model.tracking import JobTracking, TrackedJob
from xcore.model.validation import check_field_types
from xcore.progress import Progress, plural
from xcore.runtime import collector
from xcore.runtime.launcher import INTERRUPTED, BatchLauncher, LazyFuture, UnitTicket
from xcore.runtime.packaging import package
from xcore.runtime.recorder import PendingAdd
from xcore.runtime.tracker_links import tracking_for
from xcore.runtime.tracking import cancel_jobs, refresh_jobs, wait_for
from xcore.store import MetadataStore
from xcore.store.records import ExperimentRecord, JobRecord, NewJob, UnitWrite, WorkUnitRecord
from xcore.store.redaction import mask_args, mask_nested_urls, redact_env, redact_nested

if TYPE_CHECKING:
    import asyncio  # imported where a loop is used: a plain script never pays for it

    from xcore.runtime.rerun import RetryPlan

# -- experiment ------------------------------------------------------------------------------

CANCELLED_PLACEHOLDER = "launch_cancelled"
"""The name of the job that records a work unit whose job generator was cancelled before it
added any job (see ``Experiment.cancel_launch``)."""

created_experiment_ids: list[int] = []
"""Experiments this process created or added to, in order, so ``xcore launch`` can report them."""


class Experiment:
    """A titled set of work units, recorded in the metadata store."""

    def __init__(self, record: ExperimentRecord, store: MetadataStore, host: PluginHost, next_unit_id: int = 1) -> None:
        self._record = record
        self._store = store
        self._host = host
        self._progress = Progress()
        self._launcher = BatchLauncher(store, host, self._progress, record.title, ExperimentUnitError, record.id)
        self._launcher.on_unrecorded = self._forget_unrecorded
        self._units: dict[int, ExperimentUnit] = {}
        self._identities: dict[str, ExperimentUnit] = {}
        self._next_id = next_unit_id
        self._id_lock = threading.Lock()
        self._dump_cache: dict[int, tuple[object, dict[str, Any]]] = {}
        self._checked_executors: dict[int, object] = {}  # kept alive so ids stay unique
        self._retry_executors: dict[tuple[int, Retry], tuple[Any, Any]] = {}  # see _with_retry
        self._generator_loop: asyncio.AbstractEventLoop | None = None
        self._owns_generator_loop = False
        self._context_tokens: list[Any] = []
        self._generator_tasks: list[concurrent.futures.Future] = []
        self._cancelled_launches = 0  # adds whose future was cancelled: ignored at the block's end
        self._flush_scheduled: set[int] = set()  # event loops with a flush queued (see _schedule_flush)
        self._tracking: Callable[[TrackedJob], JobTracking] | None = None
        self._tracking_decided = False
        self._waits_for: dict[tuple[int, int], set[tuple[int, int]]] = {}  # unit -> the units it depends on
        self.context = MetadataContext(ContextAnnotations(store, record))

    def hold_lease(self) -> None:
        """Open the launcher's lease now, not at the first add: a launcher killed before it
        recorded anything then leaves a lease, and a later command marks the experiment
        failed to launch instead of LAUNCHING forever (``xcore.runtime.orphans``)."""
        self._launcher.lease_id()

    # identity
    @classmethod
    def reopen(cls, record: ExperimentRecord, store: MetadataStore, host: PluginHost,
               units: Sequence[WorkUnitRecord]) -> Experiment:
        """An experiment recorded earlier, with its units as the store holds them, ready to be
        inspected or added to (new units take the ids after the last one)."""
        experiment = cls(record, store, host, next_unit_id=max((u.id for u in units), default=0) + 1)
        for stored in units:
            auxiliary = stored.role == "auxiliary"
            unit_cls = AuxiliaryUnit if auxiliary else WorkUnit
            role: ExperimentUnitRole = AuxiliaryUnitRole() if auxiliary else WorkUnitRole()
            unit = unit_cls(experiment, stored.id, role, stored.args, identity=stored.identity,
                            job_names=tuple(j.name for j in stored.jobs))
            experiment._units[stored.id] = unit
            if stored.identity:
                experiment._identities[stored.identity] = unit
        return experiment

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
        self._context_tokens.append(core.enter_experiment(self))
        collector.block_opened()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            self._reset_context()
            self._finish(exc)
        finally:
            collector.block_closed()

    async def __aenter__(self) -> Experiment:
        import asyncio

        # Job generators run on this loop, the script's own, as in XManager.
        self._generator_loop = asyncio.get_running_loop()
        self._context_tokens.append(core.enter_experiment(self))
        collector.block_opened()
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        import asyncio

        try:
            self._reset_context()
            if self._generator_tasks:
                await asyncio.gather(*(asyncio.wrap_future(t) for t in list(self._generator_tasks)),
                                     return_exceptions=True)
            await asyncio.get_running_loop().run_in_executor(None, self._finish, exc)
        finally:
            collector.block_closed()

    def _reset_context(self) -> None:
        if self._context_tokens:
            core.leave_experiment(self._context_tokens.pop())

    def _finish(self, exc: BaseException | None) -> None:

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
                if task.cancelled():  # launch.cancel(): counted in _cancelled_launches
                    continue
                try:
                    task.result()
                except concurrent.futures.CancelledError:  # its task was cancelled from inside: ignored too
                    self._cancelled_launches += 1
                except BaseException as task_error:  # recorded below, first error re-raised
                    self._launcher.errors.append(task_error)
            self._launcher.close()
            if self._cancelled_launches:  # as XManager: cancelled launches are ignored, and counted
                import logging

                text = f"experiment {self.experiment_id}: ignored {plural(self._cancelled_launches, 'cancelled task')}."
                logger = logging.getLogger("xcore")
                if logger.hasHandlers():  # the script configured logging (absl does): there, as XManager logs it
                    logger.warning(text)
                else:
                    self._progress.message(text)
        if self._launcher.submitted and self.experiment_id not in created_experiment_ids:
            created_experiment_ids.append(self.experiment_id)  # reopened and added to: `launch --wait` waits for it
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
        from xcore.runtime.notifications import after_launch

        after_launch(self._store, self._host, self.experiment_id)  # an end that came before this moment
        if exc is None and self._launcher.errors:
            raise self._launcher.errors[0]

    # packaging
    def package(self, packageables: Sequence[Packageable] = ()) -> list[Executable]:
        """Package specs for their executors, each distinct one once."""
        return package(packageables, host=self._host, progress=self._progress)

    async def package_async(self, packageable: Packageable) -> Executable:
        import asyncio

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
        depends_on: Sequence[Any] | None = None,
        when: str = "success",
    ) -> LaunchFuture:
        """Add a work unit (or an auxiliary unit) and queue its jobs for launch.

        ``depends_on``: units (or their ``add`` futures, or ``unit.job(name)`` for one job of
        a JobGroup), of this experiment or another, that must end before this unit runs:
        each completed (``when="success"``) or each ended however (``"finished"``). If one
        fails or is cancelled under ``"success"``, this unit never runs and reads CANCELLED."""
        limits.check_args(args)
        wanted = _dependencies(depends_on, when)
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
                edges = self._dependency_edges(existing.work_unit_id, wanted)
                return self._record_and_queue(existing, prepared, None, None, "", replace_unlaunched=True,
                                              edges=edges)
        is_generator = not isinstance(job, (Job, JobGroup)) and _is_async_callable(job)
        if not is_generator and callable(job) and not isinstance(job, (Job, JobGroup)):
            raise ValueError(f"Job generators must be `async def` functions; {job!r} is not.")
        if not is_generator and not isinstance(job, (Job, JobGroup)):
            raise TypeError(
                "experiment.add takes a Job, JobGroup, AuxiliaryUnitJob or async job generator,"
                f" got {type(job).__name__}."
            )
        if is_generator and wanted:
            raise ValueError("depends_on applies to a Job or JobGroup, not to a job generator: "
                             "pass depends_on to the adds inside it.")
        if isinstance(job, (Job, JobGroup)):  # not a generator (anything else was refused above)
            # Validate everything before anything is recorded, so a bad job records nothing.
            prepared = self._prepare(job, args, prefix="")
        with self._id_lock:
            unit_id = self._next_id
            self._next_id += 1
        edges = self._dependency_edges(unit_id, wanted)
        unit_cls = AuxiliaryUnit if isinstance(role, AuxiliaryUnitRole) else WorkUnit
        unit = unit_cls(self, unit_id, role, args, identity=identity)
        role_name = "auxiliary" if unit_cls is AuxiliaryUnit else "work_unit"
        stored_args = _stored_unit_args(job, args) if isinstance(job, (Job, JobGroup)) else _redacted(_jsonable(args))
        self._units[unit_id] = unit
        if identity:
            self._identities[identity] = unit
        if is_generator:
            self._launcher.record(PendingAdd(
                UnitWrite(self.experiment_id, unit_id, role_name, stored_args, identity, []), [], None))
            future = self._run_generator(job, unit, dict(args or {}))
            return LaunchFuture(future, self._launcher, unit)
        return self._record_and_queue(unit, prepared, role_name, stored_args, identity, edges=edges)

    def _dependency_edges(self, unit_id: int, wanted: list[tuple[Any, str, str]]) -> list[DependencyEdge]:
        """The edges from unit ``unit_id`` to each wanted ``(unit, job, when)``; a unit that would
        wait for itself, directly or round a circle, is refused before anything is recorded."""
        if not wanted:
            return []
        edges = [DependencyEdge(self.experiment_id, unit_id, unit.experiment.experiment_id, unit.work_unit_id, job,
                                when) for unit, job, when in wanted]
        me = (self.experiment_id, unit_id)
        graph = {key: set(value) for key, value in self._waits_for.items()}
        graph[me] = {(e.on_experiment_id, e.on_work_unit_id) for e in edges}
        cycle = find_cycle(graph, me)
        if cycle:
            path = " -> ".join(f"{e}/{u}" for e, u in cycle)
            raise ValueError(f"depends_on would make a cycle ({path}): a unit cannot wait for itself; "
                             "drop one of these dependencies.")
        self._waits_for[me] = graph[me]
        return edges

    def _forget_unrecorded(self, unit_ids: list[int]) -> None:
        """Units whose group the store refused: not in the store, so not here either (an add
        with the same identity makes a new unit)."""
        for unit_id in unit_ids:
            unit = self._units.pop(unit_id, None)
            if unit is not None and unit.identity and self._identities.get(unit.identity) is unit:
                del self._identities[unit.identity]

    def _never_launched(self, unit: ExperimentUnit) -> bool:
        """A unit from an earlier launch whose jobs all ended without reaching a backend (the
        launcher was killed or interrupted first)."""
        jobs = self.unit_jobs(unit.work_unit_id)
        return bool(jobs) and all(j.handle is None and j.status.is_terminal for j in jobs)

    def add_jobs(self, unit: ExperimentUnit, job: Job | JobGroup, args: Mapping[str, Any] | None) -> LaunchFuture:
        if isinstance(job, JobConfig):
            job = job.expand()
        prepared = self._prepare(job, args, prefix="", taken=unit.job_names)
        return self._record_and_queue(unit, prepared, None, None, "")

    def _record_and_queue(
        self, unit: ExperimentUnit, prepared: list[tuple[str, Job, SequentialArgs, dict[str, str], str]],
        role_name: str | None, stored_args: Any, identity: str, replace_unlaunched: bool = False,
        edges: list[DependencyEdge] | None = None,
    ) -> LaunchFuture:
        links: list[tuple[int, str, str]] = []  # (index in prepared, name, url): ids come with the commit
        jobs: list[tuple[str, Executable, Any, list[str], dict[str, str], str, Retry]] = []
        new_jobs: list[NewJob] = []
        if not self._tracking_decided:  # once: when no tracker hook has anything to add, no call per job
            self._tracking, self._tracking_decided = tracking_for(self._host, os.environ), True
        tracking = self._tracking
        for index, (name, job, argv, env, kind) in enumerate(prepared):
            if tracking is not None:
                extra = tracking(TrackedJob(
                    self.experiment_id, self._record.title, tuple(self._record.tags), unit.work_unit_id, name,
                    unit.args, env, os.environ))
                if extra.links:
                    links += [(index, link_name, url) for link_name, url in extra.links.items()]
                if extra.env:
                    env = {**extra.env, **env}
            args = argv.to_argv()
            executor = job.executor
            if job.retry is not None:  # the job's own policy is stored with its executor (read by observers)
                executor = self._with_retry(executor, job.retry)
            new_jobs.append(NewJob(name=name, executor_kind=kind, executor=self._dump(executor),
                                   executable=self._dump(job.executable), args=mask_args(args),
                                   env=redact_env(env) if env else {}))
            jobs.append((name, job.executable, executor, args, env, kind,
                         getattr(executor, "retry", None) or DEFAULT_RETRY))
        write = UnitWrite(self._record.id, unit.work_unit_id, role_name, stored_args, identity, new_jobs, links,
                          replace_unlaunched, edges or [])
        unit.note_job_names((prepared[0][0],) if len(prepared) == 1 else tuple([entry[0] for entry in prepared]))
        future: concurrent.futures.Future = LazyFuture()
        # Recorded with its group (xcore.runtime.recorder): at the latest when the future is
        # waited for, the experiment ends, or before any job is handed to a backend.
        self._launcher.record(PendingAdd(write, jobs, UnitTicket(future, unit, len(jobs))))
        self._schedule_flush()
        return LaunchFuture(future, self._launcher, unit)

    def _schedule_flush(self) -> None:
        """Added from a running event loop (an async script, a job generator): submit once
        that loop gets control back, i.e. at the next ``await`` that suspends."""
        loop = _running_loop()
        if loop is None:
            return
        if id(loop) in self._flush_scheduled:
            return
        self._flush_scheduled.add(id(loop))

        def flush() -> None:
            self._flush_scheduled.discard(id(loop))
            try:
                self._launcher.request_flush()
            except Exception:  # noqa: S110 - a refused group: its futures failed and the block's end raises it
                pass

        loop.call_soon(flush)

    def _prepare(
        self, job: Job | JobGroup, args: Mapping[str, Any] | None, prefix: str, taken: Collection[str] | None = None
    ) -> list[tuple[str, Job, SequentialArgs, dict[str, str], str]]:
        """Flatten a job or group into (name, job, final args, env), validating kinds and args."""
        if isinstance(job, Job):
            check_job(job)
            limits.check_args(job.args, f"The args of job {job.name or prefix or 'job'}")
            argv, env = job_args_with_overrides(job, args)
            executor = job.executor
            kind = self._host.kinds.kind_of(executor)  # unknown executor: a clear error before recording
            if self._checked_executors.get(id(executor)) is not executor:  # also executors that skip the base check
                check_field_types(executor)
                if executor.retry is not None:  # an explicit policy the backend cannot honour: refused now
                    executor.check_policy(executor.retry)
                self._checked_executors[id(executor)] = executor
            if job.retry is not None:  # refused now, before any record, by an executor that cannot honour it
                executor.check_policy(job.retry)
                self._with_retry(executor, job.retry)
            name = prefix or job.name or job.executable.name
            if taken:
                base, n = name, 1
                while name in taken:
                    n += 1
                    name = f"{base}_{n}"
            return [(name, job, argv, env, kind)]
        taken = set() if taken is None else set(taken)
        if isinstance(job, JobGroup):
            args = dict(args or {})
            unknown = set(args) - set(job.jobs)
            if unknown:
                raise ValueError(
                    f"args for a JobGroup are keyed by job name {sorted(job.jobs)}; unknown: {sorted(unknown)}.")
            prepared: list[tuple[str, Job, SequentialArgs, dict[str, str], str]] = []
            for key, member in job.jobs.items():
                entries = self._prepare(member, args.get(key), f"{prefix}_{key}" if prefix else key, taken)
                taken.update(name for name, *_ in entries)
                prepared += entries
            return prepared
        raise TypeError(f"Expected a Job or JobGroup, got {type(job).__name__}.")

    def _with_retry(self, executor: Any, retry: Retry) -> Any:
        """``executor`` carrying a job's own retry policy (one copy per executor and policy)."""
        if getattr(executor, "retry", None) == retry:
            return executor
        key = (id(executor), retry)
        cached = self._retry_executors.get(key)
        if cached is None or cached[0] is not executor:
            cached = self._retry_executors[key] = (executor, attrs.evolve(executor, retry=retry))
        return cached[1]

    def _dump(self, obj: object) -> dict[str, Any]:
        cached = self._dump_cache.get(id(obj))
        if cached is None or cached[0] is not obj:
            # as stored: secrets redacted, URL passwords masked (an executable's args among them)
            cached = (obj, mask_nested_urls(redact_nested(self._host.serializer.dump(obj))))
            self._dump_cache[id(obj)] = cached
        return cached[1]

    def _run_generator(self, generator: Any, unit: ExperimentUnit, kwargs: dict[str, Any]) -> concurrent.futures.Future:
        import asyncio

        if self._generator_loop is None or self._generator_loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="xcore-generators", daemon=True).start()
            self._generator_loop = loop
            self._owns_generator_loop = True

        async def run() -> ExperimentUnit:
            core.enter_unit(self, unit)
            try:
                await generator(unit, **kwargs)
            except DebugInterrupt:  # XManager: stop this unit, keep the experiment going
                unit.stop(message="Launch interrupted by debug mode.")
                if not self.unit_jobs(unit.work_unit_id):  # else it would read LAUNCHING for good
                    self._record_cancelled_placeholder(unit)
            return unit

        task = asyncio.run_coroutine_threadsafe(run(), self._generator_loop)
        self._generator_tasks.append(task)
        return task

    STOP_WAIT_SECS = 60.0
    """How long ``cancel_launch`` waits for the jobs it stopped to end, to say why they did."""

    def cancel_launch(self, unit: ExperimentUnit, launch: concurrent.futures.Future) -> None:
        """``experiment.add(...).cancel()``: cancel a job generator's task, keep the unit's jobs
        that no backend has yet from ever reaching one, and stop those that did. The unit reads
        CANCELLED; a job generator's unit without jobs gets one placeholder job that records it."""
        self._cancelled_launches += 1
        if launch in self._generator_tasks:
            launch.cancel()
        self._launcher.cancel_unit(unit.work_unit_id)
        jobs = self.unit_jobs(unit.work_unit_id)
        started = [j for j in jobs if j.handle is not None and j.status.is_active]
        if started:
            cancel_jobs(self._store, self._host, started)
            ids = {j.id for j in started}

            def started_jobs() -> list[JobRecord]:
                return [j for j in self.unit_jobs(unit.work_unit_id) if j.id in ids]

            try:  # a job may still be stopping (its grace period, a busy machine): see how it ends
                ended = wait_for(started_jobs, self._store, self._host, timeout=self.STOP_WAIT_SECS)
            except TimeoutError:
                ended = started_jobs()
            stopped = [j for j in ended if j.status is Status.CANCELLED]
            if stopped:
                self._store.record_states([(j.id, JobState(Status.CANCELLED, STOPPED_AT_LAUNCH)) for j in stopped])
        elif not jobs:
            self._record_cancelled_placeholder(unit)

    def _record_cancelled_placeholder(self, unit: ExperimentUnit) -> None:
        """A work unit is as its jobs are: one that never had any (its job generator was
        cancelled first) gets a job that never runs, recorded CANCELLED, so that the unit and
        the experiment do not read LAUNCHING for good."""
        placeholder = NewJob(name=CANCELLED_PLACEHOLDER, executor_kind="", executor={}, executable={}, args=[], env={})
        [job_id] = self._store.add_jobs(self.experiment_id, unit.work_unit_id, [placeholder],
                                        lease_id=self._launcher.lease_id())
        self._store.record_states([(job_id, JobState(Status.CANCELLED, CANCELLED_AT_LAUNCH))])
        unit.note_job_names((CANCELLED_PLACEHOLDER,))

    # status
    def _all_jobs(self, include_auxiliary: bool = False) -> list[JobRecord]:
        return [
            job
            for unit in self._store.work_units(self.experiment_id)
            if include_auxiliary or unit.role == "work_unit"
            for job in unit.jobs
        ]

    def unit_jobs(self, unit_id: int) -> list[JobRecord]:
        units = self._store.work_units(self.experiment_id, [unit_id])
        return units[0].jobs if units else []

    def refresh_jobs(self, jobs: list[JobRecord]) -> list[JobRecord]:
        self._launcher.flush()
        return refresh_jobs(self._store, self._host, jobs)

    def wait_for_jobs(self, jobs: Callable[[], list[JobRecord]], timeout: float | None) -> list[JobRecord]:
        self._launcher.flush()
        return wait_for(jobs, self._store, self._host, timeout=timeout)

    def cancel_jobs(self, jobs: list[JobRecord]) -> None:
        self._launcher.flush()
        cancel_jobs(self._store, self._host, jobs)

    def get_status(self) -> ExperimentUnitStatus:
        jobs = self.refresh_jobs(self._all_jobs())
        units: dict[int, list[Status]] = {}
        for job in jobs:
            units.setdefault(job.work_unit_id, []).append(job.status)
        return ExperimentUnitStatus(combine(combine(s) for s in units.values()) if units else Status.LAUNCHING)

    def wait_until_complete(self, timeout: float | None = None) -> list[JobRecord]:
        """Block until every work unit has ended, then stop auxiliary units."""
        jobs = self.wait_for_jobs(self._all_jobs, timeout)
        auxiliary = [u for u in self._units.values() if isinstance(u.role, AuxiliaryUnitRole)]
        if auxiliary:
            time.sleep(max(u.role.termination_delay_secs for u in auxiliary if isinstance(u.role, AuxiliaryUnitRole)))
            for unit in auxiliary:
                unit.stop()
        return jobs

    def stop(self) -> None:
        """Cancel every unit of the experiment."""
        self.cancel_jobs(self._all_jobs(include_auxiliary=True))

    def retry(self, work_units: Sequence[int] | None = None, *, failed: bool = True, cancelled: bool = False,
              lost: bool = False, dry_run: bool = False) -> RetryPlan:
        """Run the failed (``cancelled``, ``lost``) jobs of these units (all when None) again, as the
        next attempt of the same units, one submission per executor kind; ``xcore retry`` from
        the launch API. Active units, and units whose secrets are gone, are refused (``refused``
        says why); ``dry_run`` only says what would be resubmitted."""
        from xcore.runtime.rerun import retry

        self._launcher.flush()
        return retry(self._store, self._host, self.experiment_id, work_units, failed=failed, cancelled=cancelled,
                     lost=lost, dry_run=dry_run, progress=self._progress)


def _dependencies(depends_on: Sequence[Any] | None, when: str) -> list[tuple[Any, str, str]]:
    """``add``'s ``depends_on`` as ``(unit, job name or '', when)``, checked."""
    if depends_on is None:
        return []
    if when not in WHEN:
        raise ValueError(f"when={when!r}: expected one of {', '.join(map(repr, WHEN))}.")
    if isinstance(depends_on, (ExperimentUnit, LaunchFuture, UnitJob)):
        depends_on = [depends_on]
    wanted = []
    for entry in depends_on:
        if isinstance(entry, LaunchFuture):
            entry = entry.unit
        if isinstance(entry, UnitJob):
            unit, job = entry.unit, entry.name
        elif isinstance(entry, ExperimentUnit):
            unit, job = entry, ""
        else:
            raise TypeError(f"depends_on takes work units, the futures experiment.add returns, or unit.job(name) "
                            f"for one job of a JobGroup; got {type(entry).__name__}: {entry!r}.")
        if not isinstance(getattr(unit.experiment, "experiment_id", None), int):
            raise TypeError(f"depends_on: {unit!r} belongs to no recorded experiment; pass a unit that "
                            "experiment.add returned (or its future).")
        wanted.append((unit, job, when))
    return wanted


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any. No loop can run before something
    imported asyncio, so a plain script never imports it (a tenth of ``xcore launch``'s start-up)."""
    module = sys.modules.get("asyncio")
    if module is None:
        return None
    return module.events._get_running_loop()  # None outside a loop, without raising (a cost per add)


def _in_coroutine() -> bool:
    return _running_loop() is not None


def _is_async_callable(job: Any) -> bool:
    if isinstance(job, (Job, JobGroup, JobConfig)):
        return False
    return (
        inspect.iscoroutinefunction(job) or inspect.isasyncgenfunction(job)
        or (callable(job) and inspect.iscoroutinefunction(type(job).__call__))
    )


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _flat(value: Any) -> bool:
    """A dict of str keys to plain scalars (a sweep's usual args): JSON-ready as it is, and
    holding no environment mapping to redact."""
    if type(value) is not dict:
        return False
    for key, item in value.items():  # one loop, no generators: this runs twice per add
        if type(key) is not str or type(item) not in _PLAIN:
            return False
    return True


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


def _redacted(unit_args: Any) -> Any:
    """Unit args as stored: environments redacted (a flat dict holds none), URL passwords masked."""
    return mask_nested_urls(unit_args if _flat(unit_args) else redact_nested(unit_args))


def _stored_unit_args(job: Job | JobGroup, args: Mapping[str, Any] | None) -> Any:
    """A unit's args as stored: ``_jsonable_unit_args`` with secrets redacted, checked for
    flatness once (a sweep's usual args: a new dict of scalars, nothing to redact)."""
    if not args and type(job) is Job:
        stored = job.args.to_stored()  # a new dict or list
        if _flat(stored):
            return mask_nested_urls(stored)
        return mask_nested_urls(redact_nested(_jsonable(stored)))
    return _redacted(_jsonable_unit_args(job, args))


def _jsonable_unit_args(job: Job | JobGroup, args: Mapping[str, Any] | None) -> Any:
    """What ``xcore show`` lists as a unit's args: the add() overrides, else the job's own args."""
    if args:
        return dict(args) if _flat(args) else _jsonable(args)
    if isinstance(job, Job):
        stored = job.args.to_stored()  # a new dict or list
        return stored if _flat(stored) else _jsonable(stored)
    return {name: _jsonable_unit_args(member, None) for name, member in job.jobs.items()}
