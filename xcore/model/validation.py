"""Type checks for attrs fields, driven by their annotations.

Executors are plain attrs classes written by plugin authors; a mistyped value
(``Local(kill_grace_secs="five")``) used to be stored as is and break every later command.
``check_field_types`` compares each field's value with its annotation, so every executor
gets the check without writing validators. Annotations it cannot check (callables,
protocols, forward references it cannot resolve) are accepted.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from typing import Any

import attrs


class FieldTypeError(TypeError):
    """A field holds a value of the wrong type; the message names the class, field and type."""


def check_field_types(instance: Any) -> None:
    """Raise ``FieldTypeError`` for the first attrs field whose value does not match its annotation."""
    cls: type = type(instance)
    for field, hint in _hints(cls):
        value = getattr(instance, field.name)
        if not _matches(value, hint):
            raise FieldTypeError(
                f"{cls.__name__}({field.alias or field.name}={_short(value)}): expected {describe(hint)}, "
                f"got {type(value).__name__}."
            )
        if attrs.has(type(value)):  # options classes inside an executor (DockerOptions) too
            try:
                check_field_types(value)
            except FieldTypeError as exc:
                raise FieldTypeError(f"{cls.__name__}({field.alias or field.name}=...): {exc}") from None


@functools.cache
def _hints(cls: type) -> tuple[tuple[attrs.Attribute, Any], ...]:
    try:
        hints = typing.get_type_hints(cls)  # each base's annotations in its own module
    except Exception:  # noqa: BLE001 - an annotation we cannot resolve is not checked
        hints = {}
    return tuple((f, hints[f.name]) for f in attrs.fields(cls) if f.name in hints)


def _matches(value: Any, hint: Any) -> bool:
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if origin is typing.ClassVar or origin is typing.Annotated:
        return _matches(value, args[0]) if args else True
    if origin in (list, set, frozenset, collections.abc.Sequence, collections.abc.Set):
        if isinstance(value, (str, bytes)) and origin is collections.abc.Sequence:
            return False
        if not isinstance(value, origin):
            return False
        return not args or all(_matches(item, args[0]) for item in value)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(item, args[0]) for item in value)
        if args == ((),):
            return value == ()
        return not args or (len(args) == len(value) and all(_matches(v, a) for v, a in zip(value, args, strict=True)))
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        if not isinstance(value, origin):
            return False
        if len(args) != 2:
            return True
        return all(_matches(k, args[0]) and _matches(v, args[1]) for k, v in value.items())
    if origin is type:
        return isinstance(value, type)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # TypeVar, Protocol, callables and other hints we do not check


def describe(hint: Any) -> str:
    """Words for a type hint: ``a number (float)``, ``str or None``, ``list of str``."""
    if hint is None or hint is type(None):
        return "None"
    if hint is float:
        return "a number (float)"
    if hint is int:
        return "a whole number (int)"
    if hint is bool:
        return "True or False (bool)"
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(arg) for arg in args)
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        if args:
            inner = ", ".join("..." if a is Ellipsis else describe(a) for a in args)
            return f"{name} of {inner}"
        return name
    return getattr(hint, "__name__", str(hint))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
