"""Rows and records of the SQL store (``xcore.store.sql``), as plain functions without SQL: the
job columns it reads, the records a row becomes, and the rows its bulk writes and status updates
write. A row is anything indexed by column name (``sqlite3.Row`` or psycopg's dict row).
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from xcore.errors import NotFoundError
from xcore.model.status import JobState, Status, combine, recorded_times
from xcore.store.records import AttemptRecord, ExperimentRecord, JobRecord, StatusEvent, UnitWrite
from xcore.store.specs import SPEC_COLUMNS

# ``json.dumps`` without its Python layers: the C encoder json.dumps builds on each call, built
# once (the same text: the default separators, ASCII, NaN allowed). A 10,000-unit sweep encodes
# 30,000 small values (unit args, job args, handles); this is a quarter to a half of their cost.
# No circular-reference bookkeeping (a shared ``markers`` dict would keep the ids of a failed
# call): anything the fast path cannot encode goes to ``json.dumps``, which raises its own error.
_ENCODE = getattr(json.encoder, "c_make_encoder", None)
_ENCODER = None if _ENCODE is None else _ENCODE(
    None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True)


def dumps(value: Any) -> str:
    """``json.dumps(value)``, the same text, faster for the many small values a sweep records."""
    if _ENCODER is not None:
        try:
            return "".join(_ENCODER(value, 0))
        except Exception:  # noqa: BLE001, S110 - json.dumps raises the error it would have raised
            pass
    return json.dumps(value)


class Row(Protocol):
    """A fetched row, read by column name."""

    def __getitem__(self, column: str, /) -> Any: ...


# A job as readers get it (``specs.select_jobs`` joins the specs in); ``lease_id`` belongs to a
# launcher of this store and is never copied; the table holds the specs by id.
JOB_COLUMNS = (
    "id", "experiment_id", "work_unit_id", "name", "executor_kind", "executor", "executable", "args", "env",
    "status", "message", "exit_code", "handle_kind", "handle", "log_path", "created_at", "launched_at",
    "started_at", "ended_at", "lease_id",
)
COPIED_JOB_COLUMNS = JOB_COLUMNS[:-1]
STORED_JOB_COLUMNS = tuple(SPEC_COLUMNS.get(c, c) for c in COPIED_JOB_COLUMNS)
# What ``active_jobs`` reads: polling never needs a job's specs, args or env (read as empty).
LIGHT_JOB_COLUMNS = (", ".join(c for c in JOB_COLUMNS if c not in ("executor", "executable", "args", "env"))
                     + ", '{}' AS executor, '{}' AS executable, '[]' AS args, '{}' AS env, attempt")
#: What any write of a job's state changes (``active_job_versions``): a watcher that keeps its
#: records reads a job again only when these moved (and loads its handle again when the
#: handle, at ``base.HANDLE_IN_VERSION``, did).
VERSION_COLUMNS = "status, message, exit_code, attempt, handle, started_at, ended_at"
#: An earlier attempt's columns in ``job_attempts`` (``attempt_record`` reads them).
ATTEMPT_COLUMNS = ("job_id", "number", "status", "failure", "exit_code", "started_at", "ended_at", "message",
                   "handle_kind", "handle", "log_path")

def experiment_record(row: Row, counts: dict[str, int]) -> ExperimentRecord:
    """An ``experiments`` row with its work units counted by status (``git_dirty`` is an
    integer in SQLite, a boolean in PostgreSQL)."""
    return ExperimentRecord(
        id=row["id"], title=row["title"], tags=json.loads(row["tags"]), notes=row["notes"],
        script_path=row["script_path"], script_sha256=row["script_sha256"], git_commit=row["git_commit"],
        git_dirty=None if row["git_dirty"] is None else bool(row["git_dirty"]), user=row["user"],
        host=row["host"], created_at=row["created_at"], launch_status=row["launch_status"],
        launch_error=row["launch_error"], status_counts=counts,
    )


def job_record(row: Row, spec: Callable[[str], Any] = json.loads) -> JobRecord:
    """A job row (specs joined in as text, see ``specs.select_jobs``); ``spec`` decodes an
    executor or executable (a store may share one decoded object between jobs)."""
    return JobRecord(
        id=row["id"], experiment_id=row["experiment_id"], work_unit_id=row["work_unit_id"], name=row["name"],
        executor_kind=row["executor_kind"], executor=spec(row["executor"]),
        executable=spec(row["executable"]), args=_loads(row["args"]), env=_loads(row["env"]),
        status=Status(row["status"]), message=row["message"], exit_code=row["exit_code"],
        handle_kind=row["handle_kind"], handle=json.loads(row["handle"]) if row["handle"] else None,
        log_path=row["log_path"], created_at=row["created_at"], launched_at=row["launched_at"],
        started_at=row["started_at"], ended_at=row["ended_at"], attempt=_optional(row, "attempt", 1),
    )


def _loads(text: str) -> Any:
    """``json.loads``, without the decoder for the empty values every light job row carries
    (``active_jobs`` leaves args and env out: ``xcore watch`` reads 50,000 such rows a cycle)."""
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def _optional(row: Row, column: str, default: Any) -> Any:
    """A column some queries read and others do not."""
    try:
        value = row[column]
    except (KeyError, IndexError):
        return default
    return default if value is None else value


def attempt_record(row: Row) -> AttemptRecord:
    """A ``job_attempts`` row."""
    return AttemptRecord(row["number"], Status(row["status"]), row["failure"], row["exit_code"], row["started_at"],
                         row["ended_at"], row["message"], row["handle_kind"],
                         json.loads(row["handle"]) if row["handle"] else None, row["log_path"])


def status_event(row: Row) -> StatusEvent:
    """A ``job_events`` row."""
    return StatusEvent(row["job_id"], Status(row["status"]), row["message"], row["exit_code"], row["at"])


def orphans_by_intent(jobs: dict[int, JobRecord], intents: Iterable[Row]
                      ) -> tuple[list[tuple[str, list[JobRecord]]], list[JobRecord]]:
    """``lease_orphans``' answer from a lease's LAUNCHING jobs and its open intents (oldest
    first): the jobs each intent was submitting, per executor kind, and those none names."""
    jobs = dict(jobs)
    in_flight = []
    for intent in intents:
        group = [jobs.pop(i) for i in json.loads(intent["job_ids"]) if i in jobs]
        if group:
            in_flight.append((intent["executor_kind"], group))
    return in_flight, list(jobs.values())


class AddRows(NamedTuple):
    """What a group of adds (``record_adds``) writes, given the job ids drawn for it in order."""

    ids: list[list[int]]  # each write's job ids
    units: list[tuple[Any, ...]]  # new work units: (experiment_id, id, role, args, identity, created_at)
    jobs: list[tuple[Any, ...]]  # (id, experiment_id, work_unit_id, name, executor_kind, executor_spec,
    #                               executable_spec, args, env, created_at, lease_id)
    links: list[tuple[Any, ...]]  # (job_id, experiment_id, work_unit_id, name, url)
    more: list[tuple[int, int]]  # (experiment_id, work_unit_id) of existing units that got jobs


def add_rows(writes: Sequence[UnitWrite], ids: Sequence[int], spec: Callable[[object], int], now: float,
             lease_id: int | None) -> AddRows:
    """The rows of a group of adds; ``ids`` holds one job id per job, in order, and ``spec``
    gives a spec's id (``specs.SpecIds.of``)."""
    units = [(w.experiment_id, w.work_unit_id, w.role, dumps(w.args), w.identity, now)
             for w in writes if w.role is not None]
    per_write: list[list[int]] = []
    jobs: list[tuple[Any, ...]] = []
    links: list[tuple[Any, ...]] = []
    at = 0
    # A sweep's jobs share one executor and one executable object: asked for once per run of them.
    executor: object = None
    executable: object = None
    executor_id = executable_id = 0
    for w in writes:
        per_write.append(list(ids[at : at + len(w.jobs)]))
        for job in w.jobs:
            if job.executor is not executor:
                executor, executor_id = job.executor, spec(job.executor)
            if job.executable is not executable:
                executable, executable_id = job.executable, spec(job.executable)
            jobs.append((ids[at], w.experiment_id, w.work_unit_id, job.name, job.executor_kind, executor_id,
                         executable_id, dumps(job.args), dumps(job.env) if job.env else "{}", now, lease_id))
            at += 1
        if w.links:
            first = at - len(w.jobs)
            links += [(ids[first + index], w.experiment_id, w.work_unit_id, name, url) for index, name, url in w.links]
    more = [(w.experiment_id, w.work_unit_id) for w in writes if w.role is None and w.jobs]
    return AddRows(per_write, units, jobs, links, more)


def state_changes(jobs: Mapping[int, Row], states: Sequence[tuple[int, JobState]], now: float, where: str
                  ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What ``record_states`` writes, from the jobs' rows (``status``, ``started_at``,
    ``ended_at`` by id): the updates ``(status, message, exit_code, started_at, ended_at, failure, id)``
    and the history events ``(job_id, status, message, exit_code, at)``. A finished job never
    becomes active again, and a job named twice in one call gets one event per change."""
    updates, events = [], []
    seen: dict[int, tuple[str, float | None, float | None]] = {}  # what this call recorded, by job
    for job_id, state in states:
        current = seen.get(job_id)
        if current is None:
            row = jobs.get(job_id)
            if row is None:
                raise NotFoundError(f"No job {job_id} in {where}.")
            current = (row["status"], row["started_at"], row["ended_at"])
        status, started, ended = current
        if Status(status).is_terminal and not state.status.is_terminal:
            continue
        started, ended = recorded_times(state, started, ended, now)
        updates.append((state.status.value, state.message, state.exit_code, started, ended, state.failure, job_id))
        if status != state.status.value:
            events.append((job_id, state.status.value, state.message, state.exit_code, now))
        seen[job_id] = (state.status.value, started, ended)
    return updates, events


def unit_statuses(units: Iterable[tuple[int, int]], job_statuses: Iterable[tuple[tuple[int, int], str]]
                  ) -> dict[tuple[int, int], str]:
    """The status of each of these work units ``(experiment_id, id)`` from its jobs' statuses
    ``((experiment_id, work_unit_id), status)`` (jobs of other units are passed over): what
    ``combine`` gives, LAUNCHING for a unit without jobs. A unit whose jobs all share one
    status has that status: only mixed units are combined (10,000 single-job units cost
    10,000 Status lookups otherwise)."""
    # Per unit: None (no job), the one status its jobs share, or the set of their statuses.
    found: dict[tuple[int, int], str | set[str] | None] = dict.fromkeys(units)
    for key, status in job_statuses:
        if key not in found:
            continue
        seen = found[key]
        if seen is None:
            found[key] = status
        elif isinstance(seen, set):
            seen.add(status)
        elif seen != status:
            found[key] = {seen, status}
    return {key: seen if isinstance(seen, str) else combine(Status(s) for s in seen or ()).value
            for key, seen in found.items()}
