"""What the dashboard's pages show, read from any ``MetadataStore`` as the workspace's read
model (``xcore.workspace.views``): experiments newest first, work units with their arguments
split into columns and their results, sorted, filtered and paginated on the server."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import attrs

from xcore.model.status import Status
from xcore.runtime.results import result_names
from xcore.store import MetadataStore
from xcore.workspace.views import STATUS_ORDER, ExperimentView, UnitView
from xcore.workspace.where import filter_units

PAGE_SIZE = 50
MAX_PAGE = 10**6  # a larger page number asks the store for more rows than any integer column holds


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
    """Experiments (``ExperimentView``), newest first. ``q`` matches a title substring or a tag
    exactly; ``status`` and ``user`` filter. Only as many rows as the page needs are read when
    no user filter is set."""
    page = min(max(page, 1), MAX_PAGE)
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
    rows = [ExperimentView(record) for record in records[start : start + size]]
    more = len(records) > start + size
    return Page(rows, page, page + 1 if more else page, len(records) if want is None else None)


def columns(rows: Sequence[UnitView]) -> tuple[list[str], list[str]]:
    """The argument columns (the sweep's axes, in first-seen order) and the result columns."""
    arg_names: dict[str, None] = {}
    for row in rows:
        arg_names.update(dict.fromkeys(row.named_args))
    return list(arg_names), result_names({row.id: row.results for row in rows})


def sort_key(column: str) -> Any:
    """Rows sort by ``id``, ``status``, ``duration``, ``arg:NAME`` or ``result:NAME``;
    missing values last in either direction (handled by ``sort_rows``)."""
    kind, _, name = column.partition(":")
    if kind == "arg":
        return lambda row: row.named_args.get(name)
    if kind == "result":
        return lambda row: row.results.get(name)
    if column == "status":
        return lambda row: STATUS_ORDER.index(row.status.value)
    if column == "duration":
        return lambda row: row.duration
    return lambda row: row.id


def sort_rows(rows: list[UnitView], sort: str) -> list[UnitView]:
    descending = sort.startswith("-")
    key = sort_key(sort.lstrip("-"))
    present: list[UnitView] = []
    missing: list[UnitView] = []
    for row in rows:
        value = key(row)
        (missing if value is None or (isinstance(value, float) and math.isnan(value)) else present).append(row)
    try:
        present.sort(key=key, reverse=descending)
    except TypeError:  # mixed value types in one column
        present.sort(key=lambda r: json.dumps(key(r), sort_keys=True, default=str), reverse=descending)
    return present + missing


def filter_rows(rows: list[UnitView], *, status: str = "", q: str = "", where: str = "") -> list[UnitView]:
    """``where`` a filter (``xcore show --where``'s language, ``FilterError`` if malformed);
    ``status`` exact; ``q`` a case-insensitive substring of the arguments or message, or
    ``name=value`` for one argument (``lr=0.1``)."""
    if where.strip():
        rows = filter_units(rows, where)
    if status:
        rows = [r for r in rows if r.status.value == status.upper()]
    if q:
        name, eq, value = q.partition("=")
        if eq and name.strip():
            name, value = name.strip(), value.strip()
            rows = [r for r in rows if name in r.named_args and _text(r.named_args[name]) == value]
        else:
            needle = q.lower()
            rows = [r for r in rows if needle in _text(r.named_args).lower() or needle in r.message.lower()]
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
