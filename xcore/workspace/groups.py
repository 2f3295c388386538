"""A sweep's work units grouped by some of their arguments, with each result's aggregates:
what ``xcore show EXP --group-by lr,depth`` prints (and writes with ``--json``). A sweep with
seeds is read per configuration, not per run: count, how many completed and failed, and the
mean, standard deviation, minimum and maximum of every result."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from typing import Any

from xcore.errors import XcoreError
from xcore.model.status import Status
from xcore.workspace.views import UnitView

__all__ = ["Group", "group_units", "parse_names", "sort_groups"]


class Group:
    """The work units that share the grouped arguments' values (``args``; None where a unit
    has no such argument)."""

    __slots__ = ("args", "completed", "count", "failed", "values")

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        self.count = self.completed = self.failed = 0
        self.values: dict[str, list[float]] = {}  # each result's numbers, in unit order

    def stats(self, name: str) -> dict[str, Any] | None:
        """``n``, ``mean``, ``std`` (the sample standard deviation; None for one value), ``min``
        and ``max`` of a result; None when no unit of the group reported it."""
        values = self.values.get(name)
        if not values:
            return None
        return {"n": len(values), "mean": statistics.fmean(values),
                "std": statistics.stdev(values) if len(values) > 1 else None,
                "min": min(values), "max": max(values)}

    def to_json(self, result_names: Sequence[str]) -> dict[str, Any]:
        return {"args": self.args, "count": self.count, "completed": self.completed, "failed": self.failed,
                "results": {name: self.stats(name) for name in result_names if name in self.values}}


def parse_names(text: str) -> list[str]:
    """``"lr,depth"`` as ``["lr", "depth"]`` (spaces and empty names ignored)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise XcoreError("--group-by needs argument names, e.g. --group-by lr,depth.")
    return names


def _number(value: Any) -> float | None:
    """A result as a number to aggregate: booleans and NaN are not averaged."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if isinstance(value, float) and math.isnan(value) else float(value)


def group_units(units: Sequence[UnitView], names: Sequence[str]) -> list[Group]:
    """The work units (auxiliary units aside) grouped by the arguments ``names``, in the order
    each group is first seen. A name no work unit has as an argument is an error that lists
    those it has: a typo would otherwise make one group of everything."""
    work = [u for u in units if u.role != "auxiliary"]
    known = {k for u in work for k in u.named_args}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise XcoreError(f"Cannot group by {', '.join(map(repr, unknown))}: not an argument of these work units "
                         f"(arguments: {', '.join(sorted(known)) or 'none'}).")
    groups: dict[str, Group] = {}
    completed, failed = Status.COMPLETED, Status.FAILED
    for unit in work:
        args = unit.named_args
        values = {name: args.get(name) for name in names}
        key = json.dumps(list(values.values()), sort_keys=True, default=str)  # list values are unhashable
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(values)
        group.count += 1
        group.completed += unit.status is completed
        group.failed += unit.status is failed
        for name, value in unit.results.items():
            number = _number(value)
            if number is not None:
                group.values.setdefault(name, []).append(number)
    return list(groups.values())


def sort_groups(groups: list[Group], sort: str | None) -> list[Group]:
    """``--sort [-]NAME``: by a result's mean, a grouped argument, or ``count``/``completed``/
    ``failed``; groups without the value last. Without ``sort``: by the grouped values."""
    if not sort:
        key_name, descending = None, False
    else:
        key_name, descending = sort.lstrip("-+"), sort.startswith("-")
        known = {n for g in groups for n in g.values} | {n for g in groups for n in g.args}
        known |= {"count", "completed", "failed"}
        if key_name not in known:
            raise XcoreError(f"Cannot sort groups by {key_name!r}: use a result (by its mean), a grouped argument "
                             f"or count/completed/failed ({', '.join(sorted(known))}).")

    def value(group: Group) -> Any:
        if key_name is None:
            return list(group.args.values())
        if key_name in group.values:
            return statistics.fmean(group.values[key_name])
        if key_name in group.args:
            return group.args[key_name]
        return {"count": group.count, "completed": group.completed, "failed": group.failed}.get(key_name)

    present = [g for g in groups if value(g) is not None]
    missing = [g for g in groups if value(g) is None]
    try:
        present.sort(key=value, reverse=descending)
    except TypeError:  # mixed types: a value that is a number here, a string or None there
        present.sort(key=lambda g: json.dumps(value(g), sort_keys=True, default=str), reverse=descending)
    return present + missing
