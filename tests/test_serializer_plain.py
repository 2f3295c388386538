"""Handles of plain scalar fields load without cattrs, to the same object cattrs builds."""

from __future__ import annotations

import subprocess
import sys

import attrs
from class_checks import dumped_as_cattrs_dumps

from xcore.hooks.kinds import KindRegistry
from xcore.hooks.serialization import Serializer
from xcore.model.execution import JobHandle


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
from xcore.model.execution import JobHandle
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


def _real_samples() -> list[object]:
    """Executors, executables, specs and handles of the core (and of the fake backend) as a launch
    builds them; xlocal's: plugins/xlocal/tests/test_local_classes.py."""
    import xcore as xm
    from xcore.model import executables as core
    from xcore.testing import fake

    args = xm.SequentialArgs.from_collection({"seed": 3, "name": "a b $x\n", "flag": True})
    return [
        fake.FakeExecutor(),
        fake.FakeExecutor(requirements=xm.JobRequirements(cpu=2, ram=3 * xm.GiB, location="here", replicas=2),
                          hold=True, fail_launch="no", pause_after_launch="/p"),
        fake.FakeSpec(),
        fake.FakeExecutable(name="true", command=["/bin/true", "--x=é"], cwd=None),
        fake.FakeExecutable(name="p", command=["python3", "-m", "m"], cwd="/w", args=args, env_vars={"K": "v w"}),
        fake.FakeHandle(record="/r/4.json", log_path="/r/4.log"),
        core.Binary(path="/bin/true"),
        core.PythonContainer(entrypoint=core.ModuleName("m"), docker_instructions=["RUN x"]),  # via cattrs
        core.Container(image_path="img:2"),
        core.Dockerfile(),
    ]


def test_plain_dump_is_byte_identical_to_cattrs_for_the_real_classes():
    """Written without cattrs where every value is plain (the samples that are not: taken by
    cattrs as before); the stored JSON is the same bytes either way."""
    from xcore.testing import fake, plugin_host

    plugin_host({"fake": fake}, entry_points=True)
    plain_taken = dumped_as_cattrs_dumps(_real_samples())
    assert plain_taken.count("FakeExecutor") == 2 and plain_taken.count("FakeExecutable") == 2
    assert "FakeHandle" in plain_taken
    assert "PythonContainer" not in plain_taken  # a tuple and an untagged attrs value: cattrs


def test_plain_dump_falls_back_to_cattrs_for_values_it_does_not_know():
    import enum

    class Color(enum.Enum):
        RED = "red"

    serializer = _serializer()
    handle = _Handle(name="a", count=1, at=1.0, note=Color.RED)  # type: ignore[arg-type]
    assert serializer.dump(handle) == serializer._conv.unstructure(handle)
    assert serializer.dump(handle)["note"] == "red"


def test_every_installed_kind_built_from_defaults_dumps_as_cattrs_does():
    """Each registered class (the core's, the fake backend's and every installed plugin's) built
    from its defaults, required text fields filled: the same data with or without cattrs."""
    import json

    from xcore.testing import fake, plugin_host

    serializer = plugin_host({"fake": fake}, entry_points=True).serializer
    checked = 0
    for entry in serializer.registry:
        required = [f for f in attrs.fields(entry.cls) if f.init and f.default is attrs.NOTHING]
        try:
            obj = entry.cls(**{f.alias or f.name.lstrip("_"): "x" for f in required})
        except Exception:  # noqa: BLE001 - a class that needs more than text: covered by the samples above
            continue
        assert json.dumps(serializer.dump(obj)) == json.dumps(serializer._conv.unstructure(obj)), entry.kind
        checked += 1
    assert checked >= 10
