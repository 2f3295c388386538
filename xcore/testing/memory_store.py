"""``InMemoryStore``: the whole ``MetadataStore`` contract in a few dicts, for unit tests."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from xcore.errors import ConfigurationError, NotFoundError
from xcore.model.status import JobState, Status, combine
from xcore.store import ExperimentHistory, Imported, MetadataStore, StoreInfo
from xcore.store.records import ExperimentRecord, JobRecord, NewJob, StatusEvent, WorkUnitRecord

_EXPERIMENT_FIELDS = {"title", "tags", "notes", "launch_status", "launch_error"}
_NEVER_LAUNCHED = {Status.FAILED, Status.CANCELLED}  # with no handle: replace_unlaunched runs them again


class InMemoryStore(MetadataStore):
    """Keeps everything in this process; same rules as the SQLite store (ids from 1, a
    finished job never becomes active again, status changes appended to the history).
    Returned records are copies, so tests cannot change the store by accident. It keeps no
    launcher leases or submission intents (``open_lease`` returns None), so ``lease_id`` and
    ``intent_id`` are accepted and ignored."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._experiments: dict[int, ExperimentRecord] = {}
        self._units: dict[tuple[int, int], WorkUnitRecord] = {}
        self._jobs: dict[int, JobRecord] = {}
        self._events: list[StatusEvent] = []
        self._last_job_id = 0
        self._results: dict[int, dict[str, float | None]] = {}  # by job id, in recording order
        self._results_final: set[int] = set()
        self._links: dict[int, dict[str, str]] = {}

    def create_experiment(self, title: str, *, tags: Sequence[str] = (), notes: str = "",
                          script_path: str | None = None, script_sha256: str | None = None,
                          git_commit: str | None = None, git_dirty: bool | None = None, user: str = "",
                          host: str = "") -> ExperimentRecord:
        with self._lock:
            experiment_id = len(self._experiments) + 1
            self._experiments[experiment_id] = ExperimentRecord(
                experiment_id, title, list(tags), notes, script_path, script_sha256, git_commit, git_dirty, user,
                host, time.time())
            return self.get_experiment(experiment_id)

    def update_experiment(self, experiment_id: int, **changes: Any) -> None:
        unknown = set(changes) - _EXPERIMENT_FIELDS
        if unknown:
            raise ValueError(f"Cannot update experiment fields {sorted(unknown)}.")
        with self._lock:
            record = self._experiment(experiment_id)
            for name, value in changes.items():
                setattr(record, name, list(value) if name == "tags" else value)

    def _experiment(self, experiment_id: int) -> ExperimentRecord:
        try:
            return self._experiments[experiment_id]
        except KeyError:
            raise NotFoundError(f"No experiment {experiment_id} in the in-memory store.") from None

    def add_work_unit(self, experiment_id: int, work_unit_id: int, role: str, args: Any, identity: str,
                      jobs: Sequence[NewJob], *, lease_id: int | None = None) -> list[int]:
        with self._lock:
            self._experiment(experiment_id)
            if (experiment_id, work_unit_id) in self._units:
                raise ValueError(f"Work unit {experiment_id}/{work_unit_id} exists already.")
            self._units[(experiment_id, work_unit_id)] = WorkUnitRecord(
                experiment_id, work_unit_id, role, copy.deepcopy(args), identity, time.time())
            return self.add_jobs(experiment_id, work_unit_id, jobs)

    def add_jobs(self, experiment_id: int, work_unit_id: int, jobs: Sequence[NewJob], *,
                 lease_id: int | None = None, replace_unlaunched: bool = False) -> list[int]:
        with self._lock:
            unit = self._units[(experiment_id, work_unit_id)]
            if replace_unlaunched:
                old = {j.id for j in unit.jobs if j.handle is None and j.status in _NEVER_LAUNCHED}
                unit.jobs[:] = [j for j in unit.jobs if j.id not in old]
                self._events[:] = [e for e in self._events if e.job_id not in old]
                for job_id in old:
                    del self._jobs[job_id]
            ids = []
            for job in jobs:
                self._last_job_id += 1  # ids are never reused, even after a replacement
                job_id = self._last_job_id
                record = JobRecord(job_id, experiment_id, work_unit_id, job.name, job.executor_kind,
                                   copy.deepcopy(job.executor), copy.deepcopy(job.executable), list(job.args),
                                   dict(job.env), created_at=time.time())
                self._jobs[job_id] = record
                unit.jobs.append(record)
                self._events.append(StatusEvent(job_id, Status.LAUNCHING, "", None, record.created_at))
                ids.append(job_id)
            return ids

    def _job(self, job_id: int) -> JobRecord:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise NotFoundError(f"No job {job_id} in the in-memory store.") from None

    def mark_launched(self, launched: Sequence[tuple[int, str, dict[str, Any], str | None]], *,
                      intent_id: int | None = None) -> None:
        now = time.time()
        with self._lock:
            for job_id, kind, handle, log_path in launched:
                job = self._job(job_id)
                job.handle_kind, job.handle, job.log_path, job.launched_at = kind, copy.deepcopy(handle), log_path, now
                if job.status is Status.LAUNCHING:  # marking twice appends nothing
                    job.status, job.message = Status.PENDING, "submitted"
                    self._events.append(StatusEvent(job_id, Status.PENDING, "submitted", None, now))

    def record_states(self, states: Sequence[tuple[int, JobState]], *, intent_id: int | None = None) -> None:
        now = time.time()
        with self._lock:
            for job_id, state in states:
                job = self._job(job_id)
                if job.status.is_terminal and not state.status.is_terminal:
                    continue
                if job.started_at is None:
                    job.started_at = state.started_at or (
                        now if state.status is Status.RUNNING or state.status.is_terminal else None)
                if state.status.is_terminal and job.ended_at is None:
                    job.ended_at = state.ended_at or now
                if job.status is not state.status:
                    self._events.append(StatusEvent(job_id, state.status, state.message, state.exit_code, now))
                job.status, job.message, job.exit_code = state.status, state.message, state.exit_code

    def get_experiment(self, experiment_id: int) -> ExperimentRecord:
        with self._lock:
            record = copy.deepcopy(self._experiment(experiment_id))
            counts: dict[str, int] = {}
            for (exp, _), unit in self._units.items():
                if exp == experiment_id and unit.role == "work_unit":
                    status = combine(j.status for j in unit.jobs).value
                    counts[status] = counts.get(status, 0) + 1
            record.status_counts = counts
            return record

    def list_experiments(self, *, status: str | None = None, title: str | None = None, tag: str | None = None,
                         limit: int | None = 20, user: str | None = None) -> list[ExperimentRecord]:
        with self._lock:
            found = []
            for experiment_id in sorted(self._experiments, reverse=True):
                record = self.get_experiment(experiment_id)
                if title and title.lower() not in record.title.lower():
                    continue
                if tag and tag not in record.tags:
                    continue
                if user is not None and record.user != user:
                    continue
                if status and record.status.value != status.upper():
                    continue
                found.append(record)
                if limit and len(found) >= limit:
                    break
            return found

    def work_units(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> list[WorkUnitRecord]:
        with self._lock:
            return [copy.deepcopy(unit) for (exp, unit_id), unit in sorted(self._units.items())
                    if exp == experiment_id and (work_unit_ids is None or unit_id in work_unit_ids)]

    def active_jobs(self, experiment_ids: Sequence[int]) -> list[JobRecord]:
        with self._lock:
            return [copy.deepcopy(job) for job in self._jobs.values()
                    if job.experiment_id in experiment_ids and job.status.is_active]

    def job_history(self, job_id: int) -> list[StatusEvent]:
        with self._lock:
            return [event for event in self._events if event.job_id == job_id]

    # -- the store itself: enough for ``xcore store info`` and copying *out* of a test store --

    def info(self) -> StoreInfo:
        with self._lock:
            return StoreInfo("memory:", "memory", 0, 0, f"memory-{id(self):x}", len(self._experiments),
                             len(self._units), len(self._jobs), len(self._events))

    def export_history(self, experiment_id: int) -> ExperimentHistory:
        with self._lock:
            events: dict[int, list[StatusEvent]] = {}
            for event in self._events:
                if self._jobs.get(event.job_id) and self._jobs[event.job_id].experiment_id == experiment_id:
                    events.setdefault(event.job_id, []).append(event)
            return ExperimentHistory(self.get_experiment(experiment_id), self.work_units(experiment_id), events,
                                     f"memory-{id(self):x}/{experiment_id}")

    def import_history(self, history: ExperimentHistory) -> Imported:
        raise ConfigurationError("The in-memory test store cannot import history; copy into a SQLite or "
                                 "PostgreSQL store instead.")

    def record_results(self, job_id: int, results: Mapping[str, float | None], *, final: bool = False) -> None:
        with self._lock:
            self._job(job_id)
            self._results.setdefault(job_id, {}).update(results)
            if final:
                self._results_final.add(job_id)

    def results(self, experiment_id: int,
                work_unit_ids: Sequence[int] | None = None) -> dict[int, dict[str, float | None]]:
        with self._lock:
            found: dict[int, dict[str, float | None]] = {}
            for job_id, values in self._results.items():
                job = self._jobs[job_id]
                if job.experiment_id == experiment_id and (work_unit_ids is None or job.work_unit_id in work_unit_ids):
                    found.setdefault(job.work_unit_id, {}).update(values)
            return found

    def results_pending(self, experiment_id: int) -> list[int]:
        with self._lock:
            return [job.id for job in self._jobs.values() if job.experiment_id == experiment_id
                    and job.status.is_terminal and job.handle is not None and job.id not in self._results_final]

    def record_links(self, links: Sequence[tuple[int, str, str]]) -> None:
        with self._lock:
            for job_id, name, url in links:
                self._job(job_id)
                self._links.setdefault(job_id, {})[name] = url

    def links(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> dict[int, dict[str, str]]:
        with self._lock:
            found: dict[int, dict[str, str]] = {}
            for job_id, values in self._links.items():
                job = self._jobs[job_id]
                if job.experiment_id == experiment_id and (work_unit_ids is None or job.work_unit_id in work_unit_ids):
                    found.setdefault(job.work_unit_id, {}).update(values)
            return found


class MemoryStorePlugin:
    """A plugin object that answers ``XCORE_STORE=memory:`` with one shared ``InMemoryStore``:
    ``plugin_host({"memory": MemoryStorePlugin(store)})`` and set ``XCORE_STORE=memory:``."""

    def __init__(self, store: InMemoryStore | None = None) -> None:
        self.store = store or InMemoryStore()

    from xcore.hooks.markers import hookimpl as _hookimpl

    @_hookimpl(tryfirst=True)
    def xcore_open_store(self, url: str, options: dict[str, Any]) -> MetadataStore | None:
        return self.store if url == "memory:" else None
