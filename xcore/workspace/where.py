"""Work units selected by a filter (``xcore.model.filters``): what a filter's names mean for a
work unit, shared by ``xcore show --where`` and the dashboard's filter box.

A bare name is the unit's argument of that name, else its result, else one of its fields:
``status``, ``message`` (what its jobs that did not complete said), ``error`` (their error
lines, see ``xcore.model.error_lines``), ``name`` (its jobs' names), ``id``, ``exit_code``
and ``duration`` (seconds). ``arg.NAME`` and ``result.NAME`` say which one is meant when an
argument and a result share a name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xcore.model.error_lines import ERROR_MARK
from xcore.model.filters import MISSING, Filter, FilterError, parse
from xcore.workspace.views import UnitView

__all__ = ["FIELDS", "compile_filter", "filter_units", "unit_errors", "unit_value"]


def unit_errors(unit: UnitView) -> list[str]:
    """The error lines of the unit's jobs, from their messages."""
    found = []
    for job in unit.jobs:
        message = job["message"] or ""
        at = message.find(ERROR_MARK)
        if at == 0 or (at > 0 and message[at - 2 : at] == "; "):
            found.append(message[at + len(ERROR_MARK):])
    return found


FIELDS: dict[str, Callable[[UnitView], Any]] = {
    "status": lambda u: u.status.value,
    "message": lambda u: u.message,
    "error": lambda u: "\n".join(unit_errors(u)) or MISSING,
    "name": lambda u: [job["name"] for job in u.jobs],
    "id": lambda u: u.id,
    "exit_code": lambda u: [code for code in u.exit_codes if code is not None] or MISSING,
    "duration": lambda u: MISSING if u.duration is None else u.duration,
}


def unit_value(unit: UnitView, name: str) -> Any:
    """The unit's value for ``name`` (``MISSING`` when it has none): its argument, else its
    result, else the field."""
    prefix, dot, rest = name.partition(".")
    if dot and prefix in ("arg", "args"):
        return unit.named_args.get(rest, MISSING)
    if dot and prefix in ("result", "results"):
        return unit.results.get(rest, MISSING)
    args = unit.named_args
    if name in args:
        return args[name]
    if name in unit.results:
        return unit.results[name]
    field = FIELDS.get(name)
    return MISSING if field is None else field(unit)


def _lookup(unit: UnitView) -> Callable[[str], Any]:
    return lambda name: unit_value(unit, name)


def compile_filter(text: str, units: Sequence[UnitView]) -> Filter:
    """``text`` parsed and checked against ``units``: a name that is neither a field nor an
    argument or result of any of them is a ``FilterError`` listing those there are (a typo
    would otherwise select nothing, silently)."""
    found = parse(text)
    args: set[str] = set()
    results: set[str] = set()
    for unit in units:
        args.update(unit.named_args)
        results.update(unit.results)
    for name in found.names:
        prefix, dot, rest = name.partition(".")
        if dot and prefix in ("arg", "args", "result", "results"):
            known = args if prefix.startswith("arg") else results
            if rest in known:
                continue
        elif name in args or name in results or name in FIELDS:
            continue
        raise FilterError(
            f"Bad filter {text!r}: unknown name {name!r}: not an argument, a result or a field "
            f"(arguments: {', '.join(sorted(args)) or 'none'}; results: {', '.join(sorted(results)) or 'none yet'}; "
            f"fields: {', '.join(FIELDS)}).")
    return found


def filter_units(units: list[UnitView], text: str | None) -> list[UnitView]:
    """The units ``text`` selects, in their order (all of them for no filter)."""
    if not text or not text.strip():
        return units
    found = compile_filter(text, units)
    return [unit for unit in units if found.matches(_lookup(unit))]
