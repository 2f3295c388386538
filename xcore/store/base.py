"""The metadata store interface (exported by ``xcore.store``). The embedded SQLite store
implements it; a plugin may provide another (a server database) through the ``xcore_open_store`` hook."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from xcore.errors import StoreError
from xcore.model import datamodel
from xcore.model.dependencies import DependencyEdge
from xcore.model.status import JobState, Status
from xcore.store.outbox import NewNotification, NotificationRecord
from xcore.store.records import (
    ExperimentRecord,
    JobAttempts,
    JobRecord,
    LeaseRecord,
    NewJob,
    StatusEvent,
    UnitSummary,
    UnitWrite,
    WorkUnitRecord,
)


@datamodel.frozen
class StoreInfo:
    """What ``xcore store info`` shows. ``url`` never carries a password."""

    url: str
    backend: str
    schema_version: int
    code_schema_version: int
    store_id: str
    experiments: int
    work_units: int
    jobs: int
    status_events: int


@datamodel.define
class ExperimentHistory:
    """One experiment with everything recorded about it, as ``xcore store copy`` moves it.

    ``origin`` names where it was first recorded (``STORE_ID/EXPERIMENT_ID``), so a second copy
    (or a copy back) recognises it."""

    experiment: ExperimentRecord
    units: list[WorkUnitRecord]
    events: dict[int, list[StatusEvent]]  # by job id, oldest first
    origin: str
    # Trial results ``(job_id, name, value, at)``, when each job's results were final (by job
    # id), and tracker links ``(job_id, name, url)``: copied too, so a copy shows the same table.
    results: list[tuple[int, str, float | None, float]] = attrs.field(factory=list)
    results_final: dict[int, float] = attrs.field(factory=dict)
    links: list[tuple[int, str, str]] = attrs.field(factory=list)
    # Learning curves ``(job_id, name, points, at)``, points as the stored JSON text.
    series: list[tuple[int, str, str, float]] = attrs.field(factory=list)
    # What its units wait for, and the held ones' states ``(work_unit_id, state, changed_at)``:
    # a copy keeps a pipeline's edges and who released what. An edge to another experiment
    # names it by id here; ``dependency_origins`` gives that experiment's origin, by which the
    # destination finds its own id for it (it was copied first: copies go oldest first).
    dependencies: list[DependencyEdge] = attrs.field(factory=list)
    held: list[tuple[int, str, float]] = attrs.field(factory=list)
    dependency_origins: dict[int, str] = attrs.field(factory=dict)
    # Each retried or classified job's attempts (by job id): its current attempt, last failure
    # class and earlier attempts, copied so a copy keeps the history (``job_attempts``).
    attempts: dict[int, JobAttempts] = attrs.field(factory=dict)


@datamodel.frozen
class Imported:
    """Where ``import_history`` put an experiment; ``None`` ids mean it was there already."""

    source_id: int
    experiment_id: int | None
    jobs_renumbered: bool = False


@datamodel.frozen
class CancelRequest:
    """What ``xcore cancel`` asked of an experiment: all of it (``whole``) or some units. The
    launcher reads it before and after each submission, so a cancel that lands mid-launch holds."""

    whole: bool = False
    units: frozenset[int] = frozenset()

    def covers(self, work_unit_id: int) -> bool:
        return self.whole or work_unit_id in self.units


#: Where the stored handle sits in an ``active_job_versions`` tuple.
HANDLE_IN_VERSION = 4


class MetadataStore(abc.ABC):
    """Durable record of everything launched. Every method is one atomic transaction, and
    many processes may use one store at once."""

    writes_in_background: bool = True
    """Whether the launcher's recorder writes full groups of adds on its own thread while the
    script goes on adding (a store that waits on a server or the network), or on the thread that
    filled the group (SQLite: the write is this process's own CPU work, and another thread only
    adds GIL hand-overs, see ``xcore.runtime.recorder``)."""

    @abc.abstractmethod
    def create_experiment(
        self,
        title: str,
        *,
        tags: Sequence[str] = (),
        notes: str = "",
        script_path: str | None = None,
        script_sha256: str | None = None,
        git_commit: str | None = None,
        git_dirty: bool | None = None,
        user: str = "",
        host: str = "",
    ) -> ExperimentRecord:
        """Record a new experiment and return it with its id (ids start at 1)."""

    @abc.abstractmethod
    def update_experiment(self, experiment_id: int, **changes: Any) -> None:
        """Change title, tags, notes, launch_status or launch_error."""

    @abc.abstractmethod
    def add_work_unit(
        self, experiment_id: int, work_unit_id: int, role: str, args: Any, identity: str, jobs: Sequence[NewJob],
        *, lease_id: int | None = None,
    ) -> list[int]:
        """Record a work unit and its jobs (status LAUNCHING), held by launcher lease ``lease_id``;
        return the jobs' ids in order."""

    @abc.abstractmethod
    def add_jobs(self, experiment_id: int, work_unit_id: int, jobs: Sequence[NewJob], *,
                 lease_id: int | None = None, replace_unlaunched: bool = False) -> list[int]:
        """Record more jobs of an existing work unit (job generators add jobs one by one).
        ``replace_unlaunched`` first deletes the unit's jobs that ended without ever reaching a
        backend (an identity relaunch runs them again)."""

    def record_adds(self, writes: Sequence[UnitWrite], *, lease_id: int | None = None) -> list[list[int]]:
        """Record the work units, jobs and tracker links of many adds, in order, all or nothing;
        return each write's job ids. The launcher commits adds in groups through this (one
        commit per group, not per add). This default runs ``add_work_unit``/``add_jobs``/
        ``record_links`` inside ``transaction()``; a store should override it with bulk writes."""
        ids: list[list[int]] = []
        with self.transaction():
            for write in writes:
                if write.role is None:
                    job_ids = self.add_jobs(write.experiment_id, write.work_unit_id, write.jobs, lease_id=lease_id,
                                            replace_unlaunched=write.replace_unlaunched)
                else:
                    job_ids = self.add_work_unit(write.experiment_id, write.work_unit_id, write.role, write.args,
                                                 write.identity, write.jobs, lease_id=lease_id)
                if write.links:
                    self.record_links([(job_ids[index], name, url) for index, name, url in write.links])
                ids.append(job_ids)
        return ids

    @abc.abstractmethod
    def mark_launched(self, launched: Sequence[tuple[int, str, dict[str, Any], str | None]], *,
                      intent_id: int | None = None) -> None:
        """Record ``(job_id, handle_kind, handle, log_path)`` for jobs the backend accepted;
        jobs still LAUNCHING become PENDING. Closes submission intent ``intent_id`` in the same
        transaction."""

    @abc.abstractmethod
    def record_states(self, states: Sequence[tuple[int, JobState]], *,
                      intent_id: int | None = None) -> Sequence[int] | None:
        """Store the newest state of jobs; a change of status is appended to their history.
        A state whose ``attempt`` is below the job's recorded one was read from an earlier
        attempt (another observer relaunched the job meanwhile) and is not recorded: returns
        the ids of those jobs, so the caller reads them again (None from a store that cannot tell)."""

    @abc.abstractmethod
    def get_experiment(self, experiment_id: int) -> ExperimentRecord:
        """Raise ``NotFoundError`` when there is no such experiment."""

    @abc.abstractmethod
    def list_experiments(
        self, *, status: str | None = None, title: str | None = None, tag: str | None = None, limit: int | None = 20,
        user: str | None = None,
    ) -> list[ExperimentRecord]:
        """Newest first. ``title`` matches a substring, case-insensitively; ``user`` exactly."""

    @abc.abstractmethod
    def work_units(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> list[WorkUnitRecord]:
        """Work units with their jobs, by id."""

    @abc.abstractmethod
    def active_jobs(self, experiment_ids: Sequence[int]) -> list[JobRecord]:
        """Jobs of these experiments whose last known status is not terminal, for polling:
        without their executor, executable, args and env (left empty), which polling never needs."""

    def active_jobs_among(self, experiment_ids: Sequence[int], job_ids: Sequence[int]) -> list[JobRecord]:
        """``active_jobs`` with these ids only, by id: what a watcher reads again."""
        wanted = set(job_ids)
        return [job for job in self.active_jobs(experiment_ids) if job.id in wanted]

    def change_marker(self) -> object | None:
        """A value that differs whenever anything was written to the store since it was last
        taken (by any process), or None where the store cannot tell cheaply: a watcher that sees
        it unchanged reads no job row."""
        return None

    def active_job_versions(self, experiment_ids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        """Each of ``active_jobs``' ids -> a tuple that changes whenever its state is written
        (status, message, exit code, attempt, handle, times), without building any record: a
        watcher keeps its records and reads again only the jobs whose version moved, and loads a
        handle again only when the tuple's ``HANDLE_IN_VERSION`` element moved."""
        return {job.id: (job.status.value, job.message, job.exit_code, job.attempt, repr(job.handle),
                         job.started_at, job.ended_at) for job in self.active_jobs(experiment_ids)}

    def job_statuses(self, experiment_id: int,
                     work_unit_ids: Sequence[int] | None = None) -> list[tuple[int, str, int | None, str | None]]:
        """``(work unit id, role, job id, status)`` per job of the work units (by unit id, then
        job id; a unit without jobs once, with None), without decoding any record: what a wait
        on thousands of jobs needs to know each poll (issue 14). The status is the stored
        text. This default reads ``work_units``; a store should answer it with one query."""
        found: list[tuple[int, str, int | None, str | None]] = []
        for unit in self.work_units(experiment_id, work_unit_ids):
            jobs = [(unit.id, unit.role, job.id, job.status.value) for job in unit.jobs]
            found += jobs or [(unit.id, unit.role, None, None)]
        return found

    @abc.abstractmethod
    def job_history(self, job_id: int) -> list[StatusEvent]:
        """Every status change of a job, oldest first."""

    def unit_summaries(self, experiment_id: int) -> list[UnitSummary]:
        """Every work unit of the experiment as one row, by id (for tables of big sweeps). This
        default folds ``work_units``; a store should answer it with one aggregate query."""
        return [
            UnitSummary(u.id, u.role, u.args, u.status, u.created_at, u.started_at, u.ended_at,
                        "; ".join(j.message for j in u.jobs if j.message and j.status is not Status.COMPLETED))
            for u in self.work_units(experiment_id)
        ]

    def unit_rows(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """Work units as plain dicts (``id``, ``role``, ``args``, ``identity``, ``created_at``,
        ``jobs``), each job a dict of ``JobRecord``'s fields in their order with its status as
        the string: what ``xcore show`` prints, without a record object per job (10,000 of them
        were most of its time). This default converts ``work_units``; a store may read it faster.
        Values (specs, args, env) may be shared between jobs: read-only; the job dicts are not."""
        rows = []
        for unit in self.work_units(experiment_id, work_unit_ids):
            jobs = []
            for job in unit.jobs:
                fields = attrs.asdict(job, recurse=False)
                fields["status"] = job.status.value
                jobs.append(fields)
            rows.append({"id": unit.id, "role": unit.role, "args": unit.args, "identity": unit.identity,
                         "created_at": unit.created_at, "jobs": jobs})
        return rows

    # Attempts (``xcore.model.retry``, docs/long-runs.md): a retried job keeps its id; its row
    # holds the current attempt and each earlier one is kept, never overwritten. ``record_states``
    # merges a state's ``previous_attempts`` and moves the row on when ``attempt`` is higher.

    def job_attempts(self, experiment_id: int,
                     work_unit_ids: Sequence[int] | None = None) -> dict[int, JobAttempts]:
        """``{job_id: JobAttempts}`` for the jobs of these units that were retried or failed with
        a class (others are absent: one attempt, no failure). Empty for a store without attempts."""
        return {}

    def retry_policies(self, job_ids: Sequence[int]) -> dict[int, tuple[int, Any]]:
        """``{job_id: (current attempt, the stored executor's "retry" value or None)}``: what a
        poll needs to decide whether a failed attempt is retried (asked only for failed jobs)."""
        return {}

    def begin_attempts(self, claims: Sequence[tuple[int, int, str]], lease_id: int | None,
                       message: str) -> list[int]:
        """Claim ``(job_id, attempt, status)`` for a relaunch, compare-and-set: a job whose row
        still holds that attempt in that status gets its attempt archived and becomes the next
        attempt, LAUNCHING, without a handle, held by launcher lease ``lease_id`` (so a relauncher
        killed before recording the submission is resolved like any launcher: adopted or
        failed, never submitted twice). Returns the jobs claimed; of many processes claiming one
        job at once, exactly one gets it. A store without attempts claims none."""
        return []

    # Trial results (see ``xcore.runtime.results``): the scalars a program printed as
    # ``XCORE_RESULT {"loss": 0.1}`` lines, collected from its log. Tracker links (see
    # ``xcore.trackers``): named URLs per job, recorded when the job is.

    @abc.abstractmethod
    def record_results(self, job_id: int, results: Mapping[str, float | None], *, final: bool = False) -> None:
        """Store the job's latest value of each named result (insert or overwrite by
        ``(job_id, name)``; names not given keep their value). ``final=True`` also marks the
        job's results as collected for good, so ``results_pending`` no longer lists it (set it
        once the job is terminal and its whole log was read, even when it reported nothing).
        Values are floats, or None for a non-finite or non-numeric value."""

    @abc.abstractmethod
    def results(self, experiment_id: int,
                work_unit_ids: Sequence[int] | None = None) -> dict[int, dict[str, float | None]]:
        """``{work_unit_id: {name: value}}`` for these work units (all when None); work units
        without results are absent. When jobs of one work unit report the same name, the value
        recorded last wins."""

    @abc.abstractmethod
    def results_pending(self, experiment_id: int) -> list[int]:
        """Ids of the experiment's jobs that are terminal, were launched (have a handle), and
        whose results were not yet recorded with ``final=True``: the jobs whose logs still
        need reading."""

    def record_error_line(self, job_id: int, line: str) -> None:  # noqa: B027 - optional
        """Add a failed job's error line (``xcore.runtime.error_lines``) to its message, once:
        ``exit code 1; error: RuntimeError: NaN loss``. Only a job recorded FAILED is changed.
        A store without it ignores the line: messages stay the backends' own."""

    def record_series(self, job_id: int,  # noqa: B027 - optional
                      series: Mapping[str, Sequence[tuple[float, float | None]]]) -> None:
        """Store the job's learning curves (``xcore.runtime.series``): each named series as its
        ``(step, value)`` points, already downsampled (overwrite by ``(job_id, name)``). A store
        without series ignores them: results still work, no curves are drawn."""

    def series(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None
               ) -> dict[int, dict[str, list[tuple[float, float | None]]]]:
        """``{work_unit_id: {name: [(step, value), ...]}}`` for these work units (all when
        None); units without series are absent."""
        return {}

    def record_links(self, links: Sequence[tuple[int, str, str]]) -> None:  # noqa: B027 - optional
        """Store ``(job_id, name, url)`` tracker links (overwrite by ``(job_id, name)``). A
        store without links may ignore them: launches still work, nothing links to trackers."""

    def links(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> dict[int, dict[str, str]]:
        """``{work_unit_id: {name: url}}`` of the tracker links of these work units' jobs."""
        return {}

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """Group the writes inside into one transaction where the store can (the SQLite store
        does); by default each stays its own."""
        return contextlib.nullcontext()

    # Launcher leases (see ``xcore.runtime.orphans``). A store without them returns None from
    # ``open_lease``: launches still work, but a killed launcher's jobs are not resolved.

    def open_lease(self, experiment_id: int, host: str, pid: int, proc_start: float | None) -> int | None:
        """Record that this launcher process is submitting jobs of ``experiment_id``."""
        return None

    def heartbeat(self, lease_id: int) -> None:  # noqa: B027 - optional, a no-op by default
        """The lease's holder is still alive."""

    def close_lease(self, lease_id: int) -> None:  # noqa: B027 - optional, a no-op by default
        """Everything the lease held is recorded: forget it."""

    def begin_intent(self, lease_id: int, executor_kind: str, job_ids: Sequence[int]) -> int | None:
        """Before a backend call: these jobs are about to be submitted."""
        return None

    def leases(self) -> list[LeaseRecord]:
        """Every open lease (a small table: one row per running launcher)."""
        return []

    def claim_lease(self, lease: LeaseRecord, host: str, pid: int, proc_start: float | None) -> bool:
        """Take over an expired lease to resolve it; False if another process changed it first."""
        return False

    def lease_orphans(self, lease_id: int) -> tuple[list[tuple[str, list[JobRecord]]], list[JobRecord]]:
        """The lease's jobs still LAUNCHING: ``(in flight per executor kind, never handed to a backend)``."""
        return [], []

    def resolve_lease(  # noqa: B027 - optional, a no-op by default
        self, lease_id: int, launched: Sequence[tuple[int, str, dict[str, Any], str | None]],
        failed: Sequence[tuple[int, JobState]], launch_error: str,
    ) -> None:
        """Record adopted handles and failed launches and drop the lease, in one transaction."""

    # Cancel requests: ``xcore cancel`` records one before cancelling what was submitted, and the
    # launchers of the experiment open at that moment honour it for everything they have not
    # submitted yet (see ``BatchLauncher``); a later launch (a reopened experiment) does not.

    def request_cancel(  # noqa: B027 - optional: a store without it cancels only what was submitted
        self, experiment_id: int, work_unit_ids: Sequence[int] | None = None,
    ) -> None:
        """Record that the experiment (``None``: all of it) or these units must not run, for
        the launchers whose lease is open now."""

    def cancel_requested(self, experiment_id: int, lease_id: int | None = None) -> CancelRequest:
        """What was asked to be cancelled of the experiment while the launcher of ``lease_id``
        held it (``None``: every request). Nothing by default."""
        return CancelRequest()

    def record_cancels(self, states: Sequence[tuple[int, JobState]]) -> list[int]:
        """``record_states`` for a cancel; returns the jobs this call moved to CANCELLED (not
        those another canceller recorded first), so of two concurrent ``xcore cancel`` only the
        one that cancelled a job counts it. A store that cannot tell counts every CANCELLED state."""
        self.record_states(states)
        return sorted({job_id for job_id, state in states if state.status is Status.CANCELLED})

    # -- dependencies between work units (``xcore.model.dependencies``) ---------------------

    def dependencies(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> list[DependencyEdge]:
        """What these units (``None``: every unit of the experiment) wait for, as ``record_adds`` wrote it."""
        return []

    def dependents(self, on_units: Sequence[tuple[int, int]]) -> list[DependencyEdge]:
        """The edges of every unit that waits for one of ``on_units`` (``(experiment_id, id)``)."""
        return []

    def hold_units(self, units: Sequence[tuple[int, int]], states: Sequence[tuple[int, JobState]]) -> None:
        """Mark these units held (their jobs were not submitted: an observer submits them once
        their dependencies ended) and record their jobs' ``states`` in the same transaction."""
        raise StoreError(f"{type(self).__name__} cannot hold work units for their dependencies.")

    def held_states(self, units: Sequence[tuple[int, int]]) -> dict[tuple[int, int], str]:
        """``held``, ``released`` or ``cancelled`` for each of these units ever held (others are absent)."""
        return {}

    def claim_held(self, experiment_id: int, work_unit_id: int, to: str, lease_id: int | None = None) -> bool:
        """Move a held unit to ``to`` (``released`` or ``cancelled``) if it is still held, and
        say whether this call did (of several observers, exactly one wins). Releasing also puts
        its unsubmitted jobs back to LAUNCHING under ``lease_id``, so a releaser that dies before
        it submitted them leaves orphans the next command resolves."""
        return False

    # The notifications outbox (``xcore.store.outbox``, ``xcore.runtime.notifications``). A store
    # without it records nothing and hands nothing out: no notification is delivered.

    def add_notifications(self, items: Sequence[NewNotification]) -> None:  # noqa: B027 - optional
        """Record each (event, sink) unless recorded already: the claim that makes two observers
        of one event deliver it once."""

    def take_notifications(self, claimant: str, lease_secs: float, limit: int = 100, *,
                           sinks: Sequence[str] | None = None) -> list[NotificationRecord]:
        """Up to ``limit`` due rows (pending with ``next_at`` passed, or sending past their
        lease) of ``sinks`` (None: any), now ``sending`` for ``claimant`` alone for
        ``lease_secs``, attempts counted."""
        return []

    def finish_notification(  # noqa: B027 - optional, a no-op by default
        self, event_id: str, sink: str, claimant: str, state: str, error: str = "", next_at: float = 0.0,
    ) -> None:
        """What ``claimant``'s try did: ``sent``, ``pending`` again (retried at ``next_at``) or
        ``failed`` (given up), with the error; ignored if the row is no longer ``claimant``'s."""

    def notifications(self, experiment_id: int | None = None, *, states: Sequence[str] = (),
                      limit: int = 1000) -> list[NotificationRecord]:
        """Recorded rows, newest first (of one experiment, in some states)."""
        return []

    def notification_trouble(self, experiment_id: int) -> dict[str, int]:
        """How many of the experiment's deliveries ``failed`` (given up) and how many are
        ``retrying`` (a try failed, another is due): what ``xcore show`` warns about."""
        return {"failed": 0, "retrying": 0}

    # -- the store itself (``xcore store info|migrate|copy``) ----------------------------------

    @abc.abstractmethod
    def info(self) -> StoreInfo:
        """Schema version, identity and row counts, with the URL redacted."""

    @abc.abstractmethod
    def export_history(self, experiment_id: int) -> ExperimentHistory:
        """Everything recorded about one experiment (raise ``NotFoundError`` if absent)."""

    @abc.abstractmethod
    def import_history(self, history: ExperimentHistory) -> Imported:
        """Record a copied experiment in one transaction, unless its ``origin`` is here already
        (or it was first recorded in this very store). Experiment and job ids are kept when
        free here and renumbered otherwise; work unit ids are always kept."""

    def close(self) -> None:  # noqa: B027 - optional, a no-op by default
        """Release connections."""
