"""The one place where models become JSON and back (cattrs, tagged by kind)."""

from __future__ import annotations

import enum
from typing import Any

import attrs
import cattrs

from xcore.hooks.kinds import CATEGORIES, KindRegistry
from xcore.launch.args import SequentialArgs, _Positional, plain_escaper
from xcore.launch.resources import JobRequirements
from xcore.launch.utils import ShellSafeArg


def _json_value(value: Any) -> Any:
    """ShellSafeArg and enum values are stored as the text they render to."""
    if isinstance(value, (ShellSafeArg, enum.Enum)):
        return plain_escaper(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


def args_to_json(args: SequentialArgs) -> list[Any]:
    """Positional args stay values; keyword args become one-key dicts, in order."""
    out: list[Any] = []
    for item in args._items:
        if isinstance(item, _Positional):
            out.append({"_": _json_value(args.regular_args[item.index])})
        else:
            out.append({item.name: _json_value(args.keyword_args[item.name])})
    return out


def args_from_json(data: list[Any]) -> SequentialArgs:
    args = SequentialArgs()
    for entry in data:
        ((key, value),) = entry.items()
        if key == "_":
            args._add_positional(value)
        else:
            args._set_keyword(key, value)
    return args


class Serializer:
    """Turns registered objects into ``{"kind": ..., **fields}`` dicts and back."""

    def __init__(self, registry: KindRegistry) -> None:
        self.registry = registry
        conv = cattrs.Converter()
        conv.register_unstructure_hook(JobRequirements, lambda r: r.to_dict())
        conv.register_structure_hook(JobRequirements, lambda d, _: JobRequirements.from_dict(d))
        conv.register_unstructure_hook(SequentialArgs, args_to_json)
        conv.register_structure_hook(SequentialArgs, lambda d, _: args_from_json(d))
        bases = tuple(CATEGORIES)
        conv.register_unstructure_hook_func(
            lambda t: isinstance(t, type) and issubclass(t, bases), self._unstructure_tagged
        )
        conv.register_structure_hook_func(
            lambda t: isinstance(t, type) and issubclass(t, bases), self._structure_tagged
        )
        self._conv = conv

    def dump(self, obj: Any) -> Any:
        return self._conv.unstructure(obj)

    def load(self, data: Any, cls: type | None = None) -> Any:
        """Rebuild an object; ``cls`` is only needed for untagged data."""
        if cls is None:
            cls = self.registry.entry(data["kind"]).cls
        return self._conv.structure(data, cls)

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
