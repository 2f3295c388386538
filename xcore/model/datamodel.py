"""``define`` and ``frozen``: attrs' decorators of the same name, whose classes share one
``__repr__``, ``__eq__`` and ``__hash__`` instead of compiling their own.

attrs writes each class's methods as source and compiles it: half of that, 0.25 ms a class,
is the repr and the comparisons, and a launch creates ~60 classes before its first job starts
(issue 14). These behave as attrs' generated ones do: the repr is ``Name(field=value, ...)``
over the fields with ``repr`` (a callable one formats its value; a field never set shows
``NOTHING``; a recursive one ``...``); equal means the same class and equal ``eq`` fields
(through their ``eq_key``); a frozen class hashes its ``eq`` fields, a mutable one is
unhashable. A method the class body defines itself is kept, as attrs keeps it.

Still pays for the core (issue 25, item 5): importing the launch API and xlocal's classes
(``PYTHON bench/bench_seams.py 15``, regular install, alternated, two runs, medians of 11 and
15, load 4.7-4.9) takes 86.2 / 82.5 ms of CPU with these, 96.4 / 94.7 ms with attrs' own
everywhere (x1.12-1.15; 42 core classes at that point, ~60 in a launch). For a plugin it does
not: xlocal's 7 classes made with attrs' own cost 1.1 ms more in both runs (within the noise),
and no other plugin uses them, so they need
not be part of the plugin API (``xcore.plugin``); the core's tests check every class made here
behaves as attrs' (tests/test_datamodel.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:  # type checkers see attrs' own: their attrs support knows fields, converters, __init__
    from attrs import define, frozen
else:

    def define(maybe_cls=None, **options):
        """``attrs.define`` (same options) with the shared methods."""
        return _decorate(maybe_cls, attrs.define, options)

    def frozen(maybe_cls=None, **options):
        """``attrs.frozen`` (same options) with the shared methods."""
        return _decorate(maybe_cls, attrs.frozen, options)


def _decorate(maybe_cls: Any, decorator: Callable[..., Any], options: dict[str, Any]) -> Any:
    def wrap(cls: type) -> type:
        return _add_methods(decorator(cls, repr=False, eq=False, **options), dict(vars(cls)),
                            options.get("frozen", decorator is attrs.frozen))

    if {"repr", "eq", "order", "hash", "unsafe_hash", "cache_hash", "str"} & options.keys():
        raise TypeError("xcore datamodel classes compare and print as attrs' default: use attrs itself for others")
    return wrap if maybe_cls is None else wrap(maybe_cls)


def _add_methods(cls: Any, body: dict[str, Any], is_frozen: bool) -> Any:
    fields = attrs.fields(cls)
    if "__repr__" not in body:
        cls.__repr__ = _repr_method(tuple((f.name, f.repr if callable(f.repr) else repr, f.init)
                                          for f in fields if f.repr is not False))
    if "__eq__" not in body:
        compared = tuple((f.name, f.eq_key) for f in fields if f.eq)
        cls.__eq__ = _eq_method(compared)
        if "__hash__" not in body:
            hashed = tuple((f.name, f.eq_key) for f in fields if f.hash is True or (f.hash is None and f.eq))
            cls.__hash__ = _hash_method(hashed, hash(f"xcore.model.datamodel {cls.__module__}.{cls.__qualname__}")) \
                if is_frozen else None
    return cls


_printing = threading.local()  # ids of the objects whose repr is being made, per thread


def _repr_method(shown: tuple[tuple[str, Callable[[Any], str], bool], ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        busy: set[int] | None = getattr(_printing, "ids", None)
        if busy is None:
            busy = _printing.ids = set()
        if id(self) in busy:
            return "..."
        busy.add(id(self))
        try:
            name = self.__class__.__qualname__.rsplit(">.", 1)[-1]
            return f"{name}(" + ", ".join(
                f"{field}={show(getattr(self, field) if init else getattr(self, field, attrs.NOTHING))}"
                for field, show, init in shown) + ")"
        finally:
            busy.discard(id(self))

    return __repr__


def _eq_method(compared: tuple[tuple[str, Callable[[Any], Any] | None], ...]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        for field, key in compared:
            if key is None:
                if not getattr(self, field) == getattr(other, field):
                    return False
            elif not key(getattr(self, field)) == key(getattr(other, field)):
                return False
        return True

    return __eq__


def _hash_method(hashed: tuple[tuple[str, Callable[[Any], Any] | None], ...], salt: int) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash((salt, *[getattr(self, field) if key is None else key(getattr(self, field))
                             for field, key in hashed]))

    return __hash__
