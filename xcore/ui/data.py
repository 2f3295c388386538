"""What the dashboard's pages show, read from any ``MetadataStore``: experiment rows with
status counts, work-unit rows with their arguments split into columns and their results,
sorted, filtered and paginated on the server."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import attrs

from xcore.model.status import Status
from xcore.runtime.results import result_names
from xcore.store import MetadataStore
from xcore.store.records import ExperimentRecord, UnitSummary

PAGE_SIZE = 50
STATUS_ORDER = [s.value for s in Status]


@attrs.define
class Page:
    rows: list[Any]
    page: int
    pages: int
    total: int | None  # None: not counted (more pages may exist)

    @property
    def has_next(self) -> bool:
        return self.page < self.pages


def experiments_page(store: MetadataStore, *, q: str = "", status: str = "", user: str = "", page: int = 1,
                     size: int = PAGE_SIZE) -> Page:
    """Newest first. ``q`` matches a title substring or a tag exactly; ``status`` and ``user``
    filter. Only as many rows as the page needs are read when no user filter is set."""
    page = max(page, 1)
    want = None if user else page * size + 1
    status = status.upper() if status.upper() in Status.__members__ else ""
    if q:
        found = {r.id: r for r in store.list_experiments(status=status or None, title=q, limit=want)}
        found.update({r.id: r for r in store.list_experiments(status=status or None, tag=q, limit=want)})
        records = sorted(found.values(), key=lambda r: -r.id)
    else:
        records = store.list_experiments(status=status or None, limit=want)
    if user:
        records = [r for r in records if r.user == user]
    start = (page - 1) * size
    rows = records[start : start + size]
    more = len(records) > start + size
    return Page(rows, page, page + 1 if more else page, len(records) if want is None else None)


def status_counts(record: ExperimentRecord) -> list[tuple[str, int]]:
    return sorted(record.status_counts.items(), key=lambda item: STATUS_ORDER.index(item[0])
                  if item[0] in STATUS_ORDER else len(STATUS_ORDER))


@attrs.define
class UnitRow:
    id: int
    role: str
    status: str
    args: dict[str, Any]
    raw_args: Any
    results: dict[str, float | None]
    links: dict[str, str]
    created_at: float
    started_at: float | None
    ended_at: float | None
    duration: float | None
    message: str


def unit_rows(store: MetadataStore, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> list[UnitRow]:
    """One row per work unit, from one aggregate query (``unit_summaries``) plus the results
    and links, so a 10,000-trial sweep is read without loading every job's stored specs."""
    if work_unit_ids is None:
        summaries = store.unit_summaries(experiment_id)
    else:
        wanted = set(work_unit_ids)
        summaries = [u for u in store.unit_summaries(experiment_id) if u.id in wanted] if len(wanted) > 50 else [
            UnitSummary(u.id, u.role, u.args, u.status, u.created_at, u.started_at, u.ended_at,
                        "; ".join(j.message for j in u.jobs if j.message and j.status is not Status.COMPLETED))
            for u in store.work_units(experiment_id, work_unit_ids)]
    results = store.results(experiment_id, work_unit_ids)
    links = store.links(experiment_id, work_unit_ids)
    return [_row(u, results.get(u.id, {}), links.get(u.id, {})) for u in summaries]


def _row(unit: UnitSummary, results: dict[str, float | None], links: dict[str, str]) -> UnitRow:
    args = unit.args if isinstance(unit.args, dict) else ({} if unit.args in (None, [], "") else {"args": unit.args})
    return UnitRow(
        id=unit.id, role=unit.role, status=unit.status._value_, args=args, raw_args=unit.args, results=results,
        links=links, created_at=unit.created_at, started_at=unit.started_at, ended_at=unit.ended_at,
        duration=unit.duration, message=unit.message,
    )


def columns(rows: Sequence[UnitRow]) -> tuple[list[str], list[str]]:
    """The argument columns (the sweep's axes, in first-seen order) and the result columns."""
    arg_names: dict[str, None] = {}
    for row in rows:
        arg_names.update(dict.fromkeys(row.args))
    return list(arg_names), result_names({row.id: row.results for row in rows})


def sort_key(column: str) -> Any:
    """Rows sort by ``id``, ``status``, ``duration``, ``arg:NAME`` or ``result:NAME``;
    missing values last in either direction (handled by ``sort_rows``)."""
    kind, _, name = column.partition(":")
    if kind == "arg":
        return lambda row: row.args.get(name)
    if kind == "result":
        return lambda row: row.results.get(name)
    if column == "status":
        return lambda row: STATUS_ORDER.index(row.status) if row.status in STATUS_ORDER else len(STATUS_ORDER)
    if column == "duration":
        return lambda row: row.duration
    return lambda row: row.id


def sort_rows(rows: list[UnitRow], sort: str) -> list[UnitRow]:
    descending = sort.startswith("-")
    key = sort_key(sort.lstrip("-"))
    present: list[UnitRow] = []
    missing: list[UnitRow] = []
    for row in rows:
        value = key(row)
        (missing if value is None or (isinstance(value, float) and math.isnan(value)) else present).append(row)
    try:
        present.sort(key=key, reverse=descending)
    except TypeError:  # mixed value types in one column
        present.sort(key=lambda r: json.dumps(key(r), sort_keys=True, default=str), reverse=descending)
    return present + missing


def filter_rows(rows: list[UnitRow], *, status: str = "", q: str = "") -> list[UnitRow]:
    """``status`` exact; ``q`` a case-insensitive substring of the arguments or message, or
    ``name=value`` for one argument (``lr=0.1``)."""
    if status:
        rows = [r for r in rows if r.status == status.upper()]
    if q:
        name, eq, value = q.partition("=")
        if eq and name.strip():
            name, value = name.strip(), value.strip()
            rows = [r for r in rows if name in r.args and _text(r.args[name]) == value]
        else:
            needle = q.lower()
            rows = [r for r in rows if needle in _text(r.args).lower() or needle in r.message.lower()]
    return rows


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def paginate(rows: list[Any], page: int, size: int = PAGE_SIZE) -> Page:
    pages = max(1, -(-len(rows) // size))
    page = min(max(page, 1), pages)
    return Page(rows[(page - 1) * size : page * size], page, pages, len(rows))


def cell(value: Any) -> str:
    """A table cell's text for an argument or result value (escaped by the template)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return _text(value)
