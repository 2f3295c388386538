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
    """A job's run time from its row: until ``now`` while it runs, None before it started."""
    started = job["started_at"]
    if started is None:
        return None
    ended = job["ended_at"]
    return (ended if ended is not None else now) - started


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
    """The work units (all when None) as they are stored now, by id."""
    rows = store.unit_rows(experiment_id, work_unit_ids)
    return unit_views(rows, store.results(experiment_id, work_unit_ids), store.links(experiment_id, work_unit_ids),
                      time.time(), store.dependencies(experiment_id, work_unit_ids))
