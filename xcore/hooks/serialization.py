"""The one place where models become JSON and back (cattrs, tagged by kind).

cattrs loads on first need: an object whose stored fields are all plain JSON scalars of their
declared types (a job handle, typically) is rebuilt without it, so a status poll from a new
process (``xcore show`` of running jobs) does not pay for importing it; an object whose field
values are plain JSON, requirements, args or other tagged objects (a local executor and its
executable) is written without it, so a small launch does not pay for it either (issue 14).
"""

from __future__ import annotations

import enum
import math
import operator
import types
import typing
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

import attrs

from xcore.hooks.kinds import CATEGORIES, KindRegistry
from xcore.launch.args import SequentialArgs, _Positional, plain_escaper
from xcore.launch.resources import JobRequirements
from xcore.launch.utils import ShellSafeArg
from xcore.store.rows import EncodedDict


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


def _scalar_json(value: Any) -> str:
    """The JSON text ``json.dumps`` gives a plain scalar (raises _NeedsCattrs for anything else)."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is float:
        if value != value:
            return "NaN"
        if value in (math.inf, -math.inf):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    raise _NeedsCattrs


class _ScalarEncoder:
    """Dumps objects of one class whose fields all hold plain scalars into ``EncodedDict``s:
    the dict ``dump`` gives and its JSON text, made in one pass. A launch's handles share
    most values (cluster, run directory, job id): each field remembers its last value and
    text, so a value seen just before is not encoded again. The memo is one (value, text)
    tuple per field, replaced whole, so concurrent dumps never pair a value with another's text.

    The per-object function is written out for the class's fields (as attrs writes its
    ``__init__``): a loop over the fields cost twice as much, and a sweep dumps 10,000."""

    def __init__(self, kind: str, names: tuple[str, ...]) -> None:
        enc = encode_basestring_ascii
        heads = [f"{{{enc('kind')}: {enc(kind)}, {enc(names[0])}: "] + [f", {enc(name)}: " for name in names[1:]]
        self.memo: list[tuple[Any, str]] = [(_NeedsCattrs, "")] * len(names)
        self.keys = ("kind", *names)
        count = range(len(names))
        lines = [
            "def encode(obj):",
            f"    {', '.join(f'v{i}' for i in count)}, = get(obj)",
            *(f"    m = memo[{i}]\n    t{i} = m[1] if m[0] is v{i} else miss({i}, v{i})" for i in count),
            f"    made = EncodedDict(zip(keys, (kind, {', '.join(f'v{i}' for i in count)})))",
            f"    made.text = ''.join(({', '.join(f'heads[{i}], t{i}' for i in count)}, '}}'))",
            "    return made",
        ]
        scope: dict[str, Any] = {"get": operator.attrgetter(*names) if len(names) > 1 else
                                 lambda obj: (getattr(obj, names[0]),),
                                 "memo": self.memo, "miss": self._miss, "EncodedDict": EncodedDict,
                                 "keys": self.keys, "kind": kind, "heads": tuple(heads)}
        exec("\n".join(lines), scope)  # noqa: S102 - built from field names attrs validated as identifiers
        self.encode: Callable[[Any], EncodedDict] = scope["encode"]

    def _miss(self, index: int, value: Any) -> str:
        text = _scalar_json(value)
        self.memo[index] = (value, text)
        return text


class Serializer:
    """Turns registered objects into ``{"kind": ..., **fields}`` dicts and back."""

    def __init__(self, registry: KindRegistry) -> None:
        self.registry = registry
        self._converter: Any = None
        self._plain_fields: dict[type, list[tuple[str, str, tuple[type, ...]]] | None] = {}
        self._init_names: dict[type, tuple[str, ...]] = {}
        self._encoders: dict[type, _ScalarEncoder | None] = {}

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

    def dump_encoded(self, obj: Any) -> Any:
        """``dump(obj)``, as an ``EncodedDict`` (carrying its JSON text) for an object whose
        fields are all plain scalars: a launch's job handles, which a store then writes
        without encoding each again. Equal to ``dump(obj)`` either way."""
        cls = type(obj)
        if cls in self._encoders:
            encoder = self._encoders[cls]
        else:
            encoder = self._encoders[cls] = self._scalar_encoder(obj)
        if encoder is not None:
            try:
                return encoder.encode(obj)
            except _NeedsCattrs:  # a value that is not a plain scalar: the usual way
                pass
        return self.dump(obj)

    def _scalar_encoder(self, obj: Any) -> _ScalarEncoder | None:
        cls: Any = type(obj)
        if not isinstance(obj, _TAGGED) or not attrs.has(cls):
            return None
        names = tuple(field.name for field in attrs.fields(cls) if field.init)
        if not names or "kind" in names:
            return None
        return _ScalarEncoder(self.registry.kind_of(obj), names)

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
