"""A sweep's table as CSV (``xcore show EXP --csv``, the dashboard's "CSV" link): one row per work
unit, or per group with ``--group-by``, of the chosen columns (``--columns lr,loss``).

Columns are named as in the filter language (``xcore.workspace.where``): an argument, a result,
or a field (``id``, ``status``, ``exit_code``, ``duration``, ``message``, ``error``, ``name``).
Every cell is written by the ``csv`` module (quoted when it holds a comma, a quote or a line
break), and a text cell that a spreadsheet would run as a formula (it starts with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return, and is not a number) is prefixed with ``'``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

from xcore.errors import XcoreError
from xcore.model.filters import MISSING, number_of
from xcore.workspace.groups import Group
from xcore.workspace.views import UnitView
from xcore.workspace.where import FIELDS, unit_value

__all__ = ["STATS", "group_csv", "parse_columns", "unit_columns", "unit_csv"]

STATS = ("mean", "std", "min", "max")
_DEFAULT_FIELDS = ("id", "status", "exit_code", "duration")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def parse_columns(text: str | None) -> list[str] | None:
    """``"lr,loss"`` as ``["lr", "loss"]``; None for no choice."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise XcoreError("--columns needs names, e.g. --columns lr,loss (arguments, results or id, status, "
                         "exit_code, duration, message, error, name).")
    return names


def unit_columns(units: Sequence[UnitView], chosen: Sequence[str] | None) -> list[str]:
    """The columns of the units' table: ``chosen`` (checked), else the fields, every argument,
    every result and the message."""
    args: dict[str, None] = {}
    results: dict[str, None] = {}
    for unit in units:
        args.update(dict.fromkeys(unit.named_args))
        results.update(dict.fromkeys(unit.results))
    if chosen is None:
        return [*_DEFAULT_FIELDS, *args, *(r for r in results if r not in args), "message"]
    unknown = [name for name in chosen if name not in args and name not in results and name not in FIELDS]
    if unknown:
        raise XcoreError(f"Unknown column {', '.join(map(repr, unknown))}: use an argument "
                         f"({', '.join(args) or 'none'}), a result ({', '.join(results) or 'none yet'}) "
                         f"or a field ({', '.join(FIELDS)}).")
    return list(chosen)


def _cell(value: Any) -> Any:
    if value is MISSING or value is None:
        return ""
    if isinstance(value, list):
        value = ";".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = text.replace("\x00", "\ufffd")
    if text.startswith(_FORMULA) and number_of(text) is None:
        return "'" + text
    return text


def _csv(headers: Sequence[str], rows: Iterator[Sequence[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([_cell(h) for h in headers])
    writer.writerows([_cell(c) for c in row] for row in rows)
    return out.getvalue()


def unit_csv(units: Sequence[UnitView], chosen: Sequence[str] | None = None) -> str:
    """The units as CSV text, one row each, of ``unit_columns``."""
    columns = unit_columns(units, chosen)
    return _csv(columns, ([unit_value(unit, name) for name in columns] for unit in units))


def group_csv(groups: Sequence[Group], names: Sequence[str], results: Sequence[str],
              chosen: Sequence[str] | None = None) -> str:
    """Groups (``xcore.workspace.groups``) as CSV: the grouped arguments, ``count``,
    ``completed``, ``failed`` and each result's ``NAME_mean``/``_std``/``_min``/``_max``;
    ``chosen`` keeps some of the counts and results (the grouped arguments always lead)."""
    counts = ["count", "completed", "failed"]
    if chosen is not None:
        unknown = [c for c in chosen if c not in counts and c not in results and c not in names]
        if unknown:
            raise XcoreError(f"Unknown column {', '.join(map(repr, unknown))} of groups: use count, completed, "
                             f"failed or a result ({', '.join(results) or 'none yet'}).")
        counts = [c for c in counts if c in chosen]
        results = [r for r in chosen if r in results]
    headers = [*names, *counts, *(f"{r}_{stat}" for r in results for stat in STATS)]

    def rows() -> Iterator[list[Any]]:
        for group in groups:
            row: list[Any] = [group.args.get(n) for n in names]
            row += [getattr(group, c) for c in counts]
            for name in results:
                stats = group.stats(name) or {}
                row += [stats.get(stat) for stat in STATS]
            yield row

    return _csv(headers, rows())
