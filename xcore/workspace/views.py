"""The one read model of what was launched: an experiment (``ExperimentView``) and its work
units (``UnitView``) as ``xcore list``, ``xcore show`` (its table and ``--json``) and the
dashboard show them.

A work unit is read as its plain row (``MetadataStore.unit_rows``: job dicts, no record object
per job; at 10,000 jobs the records were most of ``show``'s time, issue 14) with what readers
derive from its jobs, its results and its tracker links. Statuses stay the stored strings in
the job dicts and one ``Status`` per unit: never row -> record -> row.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import attrs

from xcore.model.dependencies import DependencyEdge
from xcore.model.status import Status, combine
from xcore.store import MetadataStore
from xcore.store.records import ExperimentRecord

STATUS_ORDER = [s.value for s in Status]  # how readers order statuses: unknown texts last
_STATUSES = {s.value: s for s in Status}  # a dict lookup: Status(value) per unit was a visible share
_COMPLETED = Status.COMPLETED.value
_NO_RESULTS: dict[str, float | None] = {}
_NO_LINKS: dict[str, str] = {}


def _rank(status: str) -> int:
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


class ExperimentView:
    """An experiment as read: its record and what readers derive from it."""

    __slots__ = ("record",)

    def __init__(self, record: ExperimentRecord) -> None:
        self.record = record

    @property
    def counts(self) -> list[tuple[str, int]]:
        """Work units per status, in status order (unknown texts last)."""
        return sorted(self.record.status_counts.items(), key=lambda item: _rank(item[0]))

    @property
    def summary(self) -> str:
        """``3: 2 completed, 1 failed``, or ``0``."""
        counts = self.counts
        total = sum(n for _, n in counts)
        return f"{total}: " + ", ".join(f"{n} {s.lower()}" for s, n in counts) if total else "0"

    def to_json(self) -> dict[str, Any]:
        """The record's fields, its status and its work-unit count: the head of ``show --json``
        and each item of ``list --json``."""
        data = attrs.asdict(self.record)
        data["status"] = self.record.status.value
        data["work_unit_count"] = self.record.work_unit_count
        return data


def job_duration(job: dict[str, Any], now: float) -> float | None:
    """A job's run time from its row: until ``now`` while it runs, None before it started; with
    the run time of its earlier attempts (``earlier_seconds``, set by ``add_attempts``)."""
    started = job["started_at"]
    earlier = job.get("earlier_seconds", 0.0)  # a retried job's duration counts every attempt
    if started is None:
        return earlier or None
    ended = job["ended_at"]
    return (ended if ended is not None else now) - started + earlier


class UnitView:
    """A work unit as read: its row's fields and job dicts (shared, not copied), what
    ``WorkUnitRecord`` derives from its jobs (status, exit codes, times), its results and its
    tracker links. ``now`` is when running units' durations are measured to."""

    __slots__ = ("args", "created_at", "depends_on", "duration", "ended_at", "exit_codes", "id", "identity", "jobs",
                 "links", "results", "role", "started_at", "status")

    def __init__(self, row: dict[str, Any], now: float, results: dict[str, float | None] = _NO_RESULTS,
                 links: dict[str, str] = _NO_LINKS, depends_on: Sequence[DependencyEdge] = ()) -> None:
        self.id: int = row["id"]
        self.depends_on = depends_on  # what it waits for (``experiment.add(..., depends_on=...)``)
        self.role: str = row["role"]
        self.args: Any = row["args"]
        self.identity: str = row["identity"]
        self.created_at: float = row["created_at"]
        self.results = results
        self.links = links
        jobs: list[dict[str, Any]] = row["jobs"]
        self.jobs = jobs
        if len(jobs) == 1:  # the common case, without the generic folds
            [job] = jobs
            status = _STATUSES.get(job["status"])
            self.status: Status = Status(job["status"]) if status is None else status
            self.exit_codes: list[int | None] = [job["exit_code"]]
            self.started_at: float | None = job["started_at"]
            self.ended_at: float | None = job["ended_at"]
        else:
            self.status = combine(Status(j["status"]) for j in jobs)
            self.exit_codes = [j["exit_code"] for j in jobs]
            starts = [j["started_at"] for j in jobs if j["started_at"] is not None]
            self.started_at = min(starts) if starts else None
            ends = [j["ended_at"] for j in jobs]
            self.ended_at = max(ends) if ends and all(e is not None for e in ends) else None
        start = self.started_at
        self.duration: float | None = (
            None if start is None else (self.ended_at if self.ended_at is not None else now) - start)
        earlier = max([j["earlier_seconds"] for j in jobs if "earlier_seconds" in j] or [0.0])
        if earlier:  # retried: every attempt's run time counts
            self.duration = (self.duration or 0.0) + earlier

    @property
    def message(self) -> str:
        """What its jobs that did not complete said, joined."""
        return "; ".join(j["message"] for j in self.jobs if j["message"] and j["status"] != _COMPLETED)

    @property
    def named_args(self) -> dict[str, Any]:
        """Its arguments by name, for columns: a list or a single value is one ``args``."""
        args = self.args
        if isinstance(args, dict):
            return args
        return {} if args in (None, [], "") else {"args": args}


def add_attempts(rows: list[dict[str, Any]], attempts: dict[int, Any]) -> None:
    """Give the job dicts of ``rows`` their attempts (``MetadataStore.job_attempts``): a retried
    or failed job gets ``attempt`` (the current one), ``failure`` (the last failure class),
    ``attempts`` (each attempt, oldest first) and ``earlier_seconds``; others carry none of these
    keys, so a plain job reads as it always did."""
    for row in rows:
        for job in row["jobs"]:
            job.pop("attempt", None)
            info = attempts.get(job["id"])
            if info is None:
                continue
            history = [{"number": a.number, "status": a.status.value, "failure": a.failure, "exit_code": a.exit_code,
                        "started_at": a.started_at, "ended_at": a.ended_at, "message": a.message,
                        "log_path": a.log_path} for a in info.earlier]
            history.append({"number": info.current, "status": job["status"], "failure": info.failure,
                            "exit_code": job["exit_code"], "started_at": job["started_at"],
                            "ended_at": job["ended_at"], "message": job["message"], "log_path": job["log_path"]})
            job["attempt"], job["failure"], job["attempts"] = info.current, info.last_failure, history
            job["earlier_seconds"] = info.earlier_seconds()


def unit_views(rows: list[dict[str, Any]], results: dict[int, dict[str, float | None]],
               links: dict[int, dict[str, str]], now: float,
               dependencies: Sequence[DependencyEdge] = ()) -> list[UnitView]:
    """Views of ``rows`` (``MetadataStore.unit_rows``) with their results, links and dependencies."""
    edges: dict[int, list[DependencyEdge]] = {}
    for edge in dependencies:
        edges.setdefault(edge.work_unit_id, []).append(edge)
    return [UnitView(row, now, results.get(row["id"], _NO_RESULTS), links.get(row["id"], _NO_LINKS),
                     edges.get(row["id"], ())) for row in rows]


def read_units(store: MetadataStore, experiment_id: int,
               work_unit_ids: Sequence[int] | None = None) -> list[UnitView]:
    """The work units (all when None) as they are stored now, by id, with their jobs' attempts."""
    rows = store.unit_rows(experiment_id, work_unit_ids)
    add_attempts(rows, store.job_attempts(experiment_id, work_unit_ids))
    return unit_views(rows, store.results(experiment_id, work_unit_ids), store.links(experiment_id, work_unit_ids),
                      time.time(), store.dependencies(experiment_id, work_unit_ids))
