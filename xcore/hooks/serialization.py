"""The one place where models become JSON and back (cattrs, tagged by kind).

cattrs loads on first need: an object whose stored fields are all plain JSON scalars of their
declared types (a job handle, typically) is rebuilt without it, so a status poll from a new
process (``xcore show`` of running jobs) does not pay for importing it; an object whose field
values are plain JSON, requirements, args or other tagged objects (a local executor and its
executable) is written without it, so a small launch does not pay for it either (issue 14).
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

import attrs

from xcore.hooks.kinds import CATEGORIES, KindRegistry
from xcore.model.args import SequentialArgs, plain_escaper
from xcore.model.distributed import Distributed
from xcore.model.resources import JobRequirements
from xcore.model.utils import ShellSafeArg


def _json_value(value: Any) -> Any:
    """ShellSafeArg and enum values are stored as the text they render to."""
    if isinstance(value, (ShellSafeArg, enum.Enum)):
        return plain_escaper(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


def args_to_json(args: SequentialArgs) -> list[Any]:
    """Positional args stay values; keyword args become one-key dicts, in order."""
    return [{"_" if name is None else name: _json_value(value)} for name, value in args.entries()]


def args_from_json(data: list[Any]) -> SequentialArgs:
    def entry(item: dict[str, Any]) -> tuple[str | None, Any]:
        ((key, value),) = item.items()
        return (None if key == "_" else key, value)

    return SequentialArgs.from_entries(entry(item) for item in data)


_SCALARS = (str, int, float, bool)
_PLAIN_VALUES = frozenset((str, int, float, bool, type(None)))
_TAGGED = tuple(CATEGORIES)


class _NeedsCattrs(Exception):
    """A value the plain dump does not take as it is: the whole object goes through cattrs."""


def _plain_fields(cls: type) -> list[tuple[str, str, tuple[type, ...]]] | None:
    """Each init field of ``cls`` as (stored name, argument name, the value types taken as
    they are), or None when some field's type is not a scalar or an optional scalar."""
    if not attrs.has(cls):
        return None
    fields = []
    for field in attrs.fields(cls):
        if not field.init:
            continue
        declared = field.type
        if declared in _SCALARS:
            allowed: tuple[type, ...] = (declared,)
        elif typing.get_origin(declared) in (typing.Union, types.UnionType):
            members = typing.get_args(declared)
            scalars = [m for m in members if m is not type(None)]
            if len(scalars) != 1 or scalars[0] not in _SCALARS or len(members) != 2:
                return None
            allowed = (scalars[0], type(None))
        else:
            return None
        fields.append((field.name, field.alias if field.alias else field.name.lstrip("_"), allowed))
    return fields


class Serializer:
    """Turns registered objects into ``{"kind": ..., **fields}`` dicts and back."""

    def __init__(self, registry: KindRegistry) -> None:
        self.registry = registry
        self._converter: Any = None
        self._plain_fields: dict[type, list[tuple[str, str, tuple[type, ...]]] | None] = {}
        self._init_names: dict[type, tuple[str, ...]] = {}

    @property
    def _conv(self) -> Any:
        if self._converter is None:
            self._converter = self._make_converter()
        return self._converter

    def _make_converter(self) -> Any:
        import cattrs

        conv = cattrs.Converter()
        conv.register_unstructure_hook(JobRequirements, lambda r: r.to_dict())
        conv.register_structure_hook(JobRequirements, lambda d, _: JobRequirements.from_dict(d))
        conv.register_unstructure_hook(Distributed, lambda d: d.to_dict())
        conv.register_structure_hook(Distributed, lambda d, _: Distributed.from_dict(d))
        conv.register_unstructure_hook(SequentialArgs, args_to_json)
        conv.register_structure_hook(SequentialArgs, lambda d, _: args_from_json(d))
        bases = tuple(CATEGORIES)
        conv.register_unstructure_hook_func(
            lambda t: isinstance(t, type) and issubclass(t, bases), self._unstructure_tagged
        )
        conv.register_structure_hook_func(
            lambda t: isinstance(t, type) and issubclass(t, bases), self._structure_tagged
        )
        return conv

    def dump(self, obj: Any) -> Any:
        """``obj`` as JSON-ready data. A registered object made of plain values (a job handle,
        typically: one per job, 10,000 in a big sweep; most executors and executables) is
        written directly, as cattrs would write it, without importing cattrs."""
        if isinstance(obj, _TAGGED):
            try:
                return self._dump_tagged_plain(obj)
            except _NeedsCattrs:
                pass
        return self._conv.unstructure(obj)

    def _dump_tagged_plain(self, obj: Any) -> dict[str, Any]:
        """What ``_unstructure_tagged`` gives, built without cattrs: raises _NeedsCattrs at the
        first value whose unstructured form it does not know to be the value as cattrs makes it."""
        cls = type(obj)
        names = self._init_names.get(cls)
        if names is None:  # once per class: a big sweep dumps 10,000 handles of one class
            names = self._init_names[cls] = tuple(field.name for field in attrs.fields(cls) if field.init)
        data: dict[str, Any] = {"kind": self.registry.kind_of(obj)}
        for name in names:
            value = getattr(obj, name)
            data[name] = value if type(value) in _PLAIN_VALUES else self._dump_plain_value(value)  # scalars inline
        return data

    def _dump_plain_value(self, value: Any) -> Any:
        kind = type(value)
        if kind in _PLAIN_VALUES:
            return value
        if kind is list:
            return [self._dump_plain_value(v) for v in value]
        if kind is dict:
            return {self._dump_plain_value(k): self._dump_plain_value(v) for k, v in value.items()}
        if kind is JobRequirements:
            return value.to_dict()
        if kind is SequentialArgs:
            return args_to_json(value)
        if kind is Distributed:
            return value.to_dict()
        if isinstance(value, _TAGGED):
            return self._dump_tagged_plain(value)
        raise _NeedsCattrs

    def load(self, data: Any, cls: type | None = None) -> Any:
        """Rebuild an object; ``cls`` is only needed for untagged data."""
        if cls is None:
            cls = self.registry.entry(data["kind"]).cls
            plain = self._load_plain(data, cls)
            if plain is not None:
                return plain
        return self._conv.structure(data, cls)

    def _load_plain(self, data: dict[str, Any], cls: type) -> Any:
        """``cls`` built straight from ``data`` when every stored field is a scalar of exactly
        its declared type (or None where the type allows it): what cattrs would build, as it
        converts nothing then. None when any field needs cattrs."""
        if cls not in self._plain_fields:
            self._plain_fields[cls] = _plain_fields(cls)
        fields = self._plain_fields[cls]
        if fields is None:
            return None
        kwargs = {}
        for name, argument, allowed in fields:
            if name in data:
                value = data[name]
                if type(value) not in allowed:
                    return None
                kwargs[argument] = value
        return cls(**kwargs)

    def _unstructure_tagged(self, obj: Any) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.registry.kind_of(obj)}
        for field in attrs.fields(type(obj)):
            if field.init:
                data[field.name] = self._conv.unstructure(getattr(obj, field.name))
        return data

    def _structure_tagged(self, data: dict[str, Any], declared: type) -> Any:
        cls = self.registry.entry(data["kind"]).cls
        if not issubclass(cls, declared):
            raise TypeError(
                f"Stored kind {data['kind']!r} is a {cls.__qualname__}, expected a {declared.__qualname__}.")
        kwargs = {}
        for field in attrs.fields(cls):
            if not field.init or field.name not in data:
                continue
            name = field.alias if field.alias else field.name.lstrip("_")
            kwargs[name] = self._conv.structure(data[field.name], field.type) if field.type else data[field.name]
        return cls(**kwargs)
