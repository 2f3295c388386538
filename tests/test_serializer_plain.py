"""Handles of plain scalar fields load without cattrs, to the same object cattrs builds."""

from __future__ import annotations

import subprocess
import sys

import attrs

from xcore.hooks.execution import JobHandle
from xcore.hooks.kinds import KindRegistry
from xcore.hooks.serialization import Serializer


@attrs.define
class _Handle(JobHandle):
    name: str
    count: int
    at: float
    flag: bool = False
    note: str | None = None


def _serializer() -> Serializer:
    registry = KindRegistry()
    registry.add("test.Handle", _Handle, "test")
    return Serializer(registry)


def test_plain_fields_load_as_cattrs_would():
    serializer = _serializer()
    for data in (
        {"kind": "test.Handle", "name": "a", "count": 2, "at": 1.5, "flag": True, "note": None, "log_path": "/l"},
        {"kind": "test.Handle", "name": "a", "count": 2, "at": 1.5},  # defaults
        {"kind": "test.Handle", "name": "a", "count": 2, "at": 3, "note": "n"},  # an int for a float: cattrs converts
        {"kind": "test.Handle", "name": 5, "count": "7", "at": 1.0},  # converted by cattrs, as before
    ):
        loaded = serializer.load(data)
        assert loaded == serializer._conv.structure(data, _Handle)
        assert type(loaded.at) is float
    assert serializer.load({"kind": "test.Handle", "name": 5, "count": "7", "at": 1.0}).count == 7


def test_a_status_poll_from_a_new_process_imports_neither_cattrs_nor_asyncio():
    code = """
import sys
import attrs
from xcore.hooks.execution import JobHandle
from xcore.hooks.kinds import KindRegistry
from xcore.hooks.serialization import Serializer

@attrs.define
class H(JobHandle):
    job_id: str
    task: int

registry = KindRegistry()
registry.add("test.H", H, "test")
assert Serializer(registry).load({"kind": "test.H", "job_id": "3", "task": 1, "log_path": None}) == H("3", 1)
assert "cattrs" not in sys.modules and "asyncio" not in sys.modules, sorted(sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
