"""Checks of the classes a launch builds, shared by the core's tests and a plugin's
(plugins/xlocal/tests/test_local_classes.py): classes made by ``xcore.model.datamodel`` behave
as attrs' own; objects written without cattrs are the bytes cattrs writes."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any

import attrs


def datamodel_classes(package: ModuleType, skip: tuple[str, ...] = ()) -> list[type]:
    """The classes made by datamodel in ``package`` and its subpackages (not those under ``skip``)."""
    found = []
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if skip and info.name.startswith(skip):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (isinstance(value, type) and value.__module__ == info.name and attrs.has(value)
                    and getattr(value.__repr__, "__qualname__", "").startswith("_repr_method.")):
                found.append(value)
    return found


def _build(kind: type, fields: Any, change: int | None = None) -> Any:
    """An instance of ``kind`` whose fields hold "value N" (and "value N!" for field ``change``)."""
    item = object.__new__(kind)
    for index, f in enumerate(fields):
        object.__setattr__(item, f.name, f"value {index}" + ("!" if index == change else ""))
    return item


def _repr_or_error(item: object) -> Any:
    try:
        return repr(item)
    except Exception as exc:  # noqa: BLE001  the same failure on both sides is what counts
        return type(exc)


def assert_made_as_attrs_makes_it(cls: type) -> None:
    """``cls`` against an attrs class with the same fields and options, on instances whose fields
    hold the same values (and ones that differ in one field): same repr, equality and hash."""
    fields = attrs.fields(cls)
    is_frozen = getattr(cls.__setattr__, "__name__", "") == "_frozen_setattrs"  # what attrs.frozen sets
    twin = attrs.make_class(cls.__name__, {
        f.name: attrs.field(repr=f.repr, eq=f.eq_key or f.eq, hash=f.hash) for f in fields}, frozen=is_frozen)
    twin.__qualname__ = cls.__qualname__
    assert _repr_or_error(_build(cls, fields)) == _repr_or_error(_build(twin, fields)), cls
    for change in [None, *range(len(fields))]:
        ours, theirs = _build(cls, fields, change), _build(twin, fields, change)
        assert (_build(cls, fields) == ours) == (_build(twin, fields) == theirs), (cls, change)
        if is_frozen and _build(twin, fields) == theirs:
            assert hash(_build(cls, fields)) == hash(ours), (cls, change)
    assert (cls.__hash__ is None) == (twin.__hash__ is None), cls


def dumped_as_cattrs_dumps(samples: list[object]) -> list[str]:
    """Dump each sample with the process's serializer, check it is what cattrs writes and loads
    back equal; the class names of those written without cattrs."""
    import json

    from xcore.hooks.host import get_host
    from xcore.hooks.serialization import _NeedsCattrs

    serializer = get_host().serializer
    plain_taken = []
    for obj in samples:
        by_cattrs = serializer._conv.unstructure(obj)
        dumped = serializer.dump(obj)
        assert json.dumps(dumped) == json.dumps(by_cattrs), obj
        assert dumped == by_cattrs
        try:
            serializer._dump_tagged_plain(obj)
            plain_taken.append(type(obj).__name__)
        except _NeedsCattrs:
            pass
        assert serializer.load(json.loads(json.dumps(dumped))) == obj
    return plain_taken
