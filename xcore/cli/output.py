"""How commands write JSON (``--json``): compact and with the C encoder when piped, indented
on a terminal; statuses as their text, attrs records as their fields."""

from __future__ import annotations

import json
import sys
from typing import Any

import attrs

from xcore.model.status import Status


def print_json(data: Any) -> None:
    indent = 2 if sys.stdout.isatty() else None  # the C encoder is only used without indent
    sys.stdout.write(json.dumps(data, indent=indent, default=json_default, ensure_ascii=False))
    sys.stdout.write("\n")  # not `+ "\n"`: that copies the whole text (10 MB for show --json of 10,000 jobs)


def json_default(value: Any) -> Any:
    """What ``json`` cannot encode by itself: a ``Status`` or an attrs record."""
    if isinstance(value, Status):
        return value.value
    if attrs.has(type(value)):
        return attrs.asdict(value, recurse=False)
    raise TypeError(type(value).__name__)
