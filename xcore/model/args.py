"""Job arguments in list and dict form, merged like XManager's ``SequentialArgs``.

``{'lr': 0.1, 'fast': True}`` renders as ``['--lr=0.1', '--fast']``; ``False`` renders as
``--nofast`` (absl style), a flat list ``{'c': [3, 4]}`` repeats the flag (``--c=3 --c=4``)
and ``None`` leaves the flag out. Later keyword values override earlier ones but keep the
first position, so merged argument lists are stable.

``to_list()`` shell-quotes by default, as XManager's does (for scripts that paste args into a
command line); xcore itself renders with ``plain_escaper``, since argv is never a shell line.
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

import attrs

UserArgs = Union[Mapping[str, Any], Iterable[Any], "SequentialArgs", None]


class _Marker:
    """Where an argument sits in ``SequentialArgs``' order. Not an attrs class: tools that walk
    attrs objects (dm-tree's ``map_structure``) see a marker as one opaque leaf, so a function
    mapped over the args' values cannot change positions or flag names."""

    __slots__ = ()
    _field = ""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and getattr(other, self._field) == getattr(self, self._field)

    def __hash__(self) -> int:
        return hash((type(self), getattr(self, self._field)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._field}={getattr(self, self._field)!r})"


class _Positional(_Marker):
    __slots__ = ("index",)
    _field = "index"

    def __init__(self, index: int) -> None:
        self.index = index


class _Keyword(_Marker):
    __slots__ = ("name",)
    _field = "name"

    def __init__(self, name: str) -> None:
        self.name = name


_KEYWORDS: dict[str, _Keyword] = {}  # one immutable marker per flag name, shared: a sweep makes none per add


_POSITIONALS: list[_Positional] = []  # likewise, one per position


def _keyword(name: str) -> _Keyword:
    marker = _KEYWORDS.get(name)
    if marker is None:
        marker = _KEYWORDS[name] = _Keyword(name)
    return marker


def plain_escaper(value: Any) -> str:
    """Render one value for argv as is: no quoting (xcore never builds a shell line)."""
    kind = type(value)
    if kind is str:  # the common cases, before the import below (a cost on every add)
        return value
    if kind is int or kind is float:  # exactly: not bool, IntEnum or other subclasses with their own str()
        return str(value)
    from xcore.model.utils import ShellSafeArg

    if isinstance(value, ShellSafeArg):
        return value.arg
    if isinstance(value, enum.Enum):
        return str(value.name)
    return value if isinstance(value, str) else str(value)


def shell_escaper(value: Any) -> str:
    """XManager's default escaper: shell-quote, except ShellSafeArg; enums render by name
    (``xm.utils.ARG_ESCAPER``)."""
    from xcore.model.utils import ARG_ESCAPER

    return ARG_ESCAPER(value)


def trivial_kwargs_joiner(key: str, value: str) -> str:
    """``--key=value`` (``xm.utils.trivial_kwargs_joiner``)."""
    from xcore.model.utils import trivial_kwargs_joiner as join

    return join(key, value)


_warned_none: set[str] = set()


def _warn_none(name: str) -> None:
    if name not in _warned_none:
        _warned_none.add(name)
        print(f'warning: {name}=None leaves the flag --{name} out; write {name}="None" to pass the text None.',
              file=sys.stderr)


def _is_flat_sequence(value: Any) -> bool:
    return type(value) in (list, tuple) and not any(type(v) in (list, tuple) for v in value)


_SCALARS = (str, int, float, bool, type(None), os.PathLike, enum.Enum)


def check_arg_value(value: Any, where: str) -> None:
    """Refuse what would only reach the job as a Python ``str()``/``repr()`` (objects, bytes,
    sets) and NUL bytes, which no process can receive. ``where`` names the argument."""
    kind = type(value)
    if kind is int or kind is float or kind is bool or value is None:  # the common cases, checked first
        return
    if kind is str and "\0" not in value:
        return
    from xcore.model.utils import ShellSafeArg

    if isinstance(value, ShellSafeArg):
        check_arg_value(value.arg, where)
        return
    if isinstance(value, enum.Enum):
        return
    if isinstance(value, _SCALARS):
        text = os.fspath(value) if isinstance(value, os.PathLike) else value
        if isinstance(text, (str, bytes)) and ("\0" in text if isinstance(text, str) else b"\0" in text):
            raise ValueError(f"{where} contains a NUL byte, which no process can receive: {value!r}.")
        if isinstance(text, bytes):
            raise TypeError(f"{where} is a bytes path; use a str path.")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_arg_value(item, f"{where}[{index}]")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has the key {key!r} of type {type(key).__name__}; use str keys.")
            check_arg_value(key, f"{where} key {key!r}")
            check_arg_value(item, f"{where}[{key!r}]")
        return
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    hint = " Decode it first (value.decode())." if isinstance(value, (bytes, bytearray)) else ""
    raise TypeError(
        f"{where} is of type {type(value).__name__} ({shown}), which would reach the job as its Python text. "
        f"Args take str, int, float, bool, None, paths, and lists, tuples or dicts of them.{hint}"
    )


class ArgsStringError(TypeError, ValueError):
    """A bare string given as args (XManager raises ValueError; earlier xcore a TypeError)."""


@attrs.define(eq=False, repr=False)
class SequentialArgs:
    """An ordered mix of positional and keyword arguments."""

    # The alias keeps the attribute's own name as the keyword, so that code rebuilding an attrs
    # object from its fields (dm-tree's map_structure) can make a SequentialArgs.
    _items: list[_Positional | _Keyword] = attrs.field(factory=list, alias="_items")
    regular_args: list[Any] = attrs.field(factory=list)
    keyword_args: dict[str, Any] = attrs.field(factory=dict)

    @classmethod
    def from_collection(cls, collection: UserArgs) -> SequentialArgs:
        if type(collection) is dict and cls is SequentialArgs:  # a sweep's usual args, built directly (once per add)
            items: list[_Positional | _Keyword] = []
            for key in collection:
                if type(key) is not str:
                    break
                marker = _KEYWORDS.get(key)
                items.append(marker if marker is not None else _keyword(key))
            else:
                made = cls.__new__(cls)
                made._items, made.regular_args, made.keyword_args = items, [], dict(collection)
                return made
        result = cls()
        if collection is None:
            return result
        if isinstance(collection, SequentialArgs):
            return result.merge(collection)
        if isinstance(collection, Mapping):
            for key, value in collection.items():
                result._set_keyword(str(key), value)
            return result
        if isinstance(collection, (str, bytes)):
            raise ArgsStringError(
                f"args must be a list or a dict, got the string {collection!r}; "
                f"write [{collection!r}] for one positional argument."
            )
        if not isinstance(collection, Iterable):
            raise TypeError(f"Unsupported args collection: {collection!r}; give a list, a dict or SequentialArgs.")
        for value in collection:
            result._add_positional(value)
        return result

    def _add_positional(self, value: Any) -> None:
        index = len(self.regular_args)
        while len(_POSITIONALS) <= index:
            _POSITIONALS.append(_Positional(len(_POSITIONALS)))
        self._items.append(_POSITIONALS[index])
        self.regular_args.append(value)

    def _set_keyword(self, name: str, value: Any) -> None:
        if name not in self.keyword_args:
            self._items.append(_keyword(name))
        self.keyword_args[name] = value

    def entries(self) -> list[tuple[str | None, Any]]:
        """Every argument in order: ``(None, value)`` for a positional one, ``(name, value)``
        for a keyword (how the store writes args, ``xcore.hooks.serialization``)."""
        return [(None, self.regular_args[item.index]) if isinstance(item, _Positional)
                else (item.name, self.keyword_args[item.name]) for item in self._items]

    @classmethod
    def from_entries(cls, entries: Iterable[tuple[str | None, Any]]) -> SequentialArgs:
        """The inverse of ``entries``."""
        result = cls()
        for name, value in entries:
            if name is None:
                result._add_positional(value)
            else:
                result._set_keyword(name, value)
        return result

    def merge(self, other: SequentialArgs) -> SequentialArgs:
        """Append ``other``'s positional args; its keyword args override ours in place."""
        if not self._items:  # nothing to override or append to: a copy (the usual first merge of an add)
            self._items = list(other._items)
            self.regular_args = list(other.regular_args)
            self.keyword_args = dict(other.keyword_args)
            return self
        for item in other._items:
            if isinstance(item, _Positional):
                self._add_positional(other.regular_args[item.index])
            else:
                self._set_keyword(item.name, other.keyword_args[item.name])
        return self

    def to_list(
        self,
        escaper: Callable[[Any], str] = shell_escaper,
        kwargs_joiner: Callable[[str, str], str] = trivial_kwargs_joiner,
    ) -> list[str]:
        """Render to command-line strings, as XManager does: shell-quoted by default
        (pass ``xcore.model.args.plain_escaper`` or ``str`` for raw argv)."""
        rendered: list[str] = []
        for item in self._items:
            if isinstance(item, _Positional):
                rendered.append(escaper(self.regular_args[item.index]))
                continue
            value = self.keyword_args[item.name]
            flag = f"--{item.name}"
            if value is None:
                _warn_none(item.name)
            elif isinstance(value, bool):
                rendered.append(escaper(flag if value else f"--no{item.name}"))
            elif _is_flat_sequence(value):
                rendered += [kwargs_joiner(escaper(flag), escaper(v)) for v in value]
            else:
                rendered.append(kwargs_joiner(escaper(flag), escaper(value)))
        return rendered

    def to_argv(self) -> list[str]:
        """The exact argv strings a job receives (no quoting)."""
        rendered: list[str] = []
        keywords, regular = self.keyword_args, self.regular_args
        for item in self._items:  # str, int and float values directly, as to_list renders them
            if type(item) is _Keyword:
                value = keywords[item.name]
                kind = type(value)
                if kind is str or kind is int or kind is float:
                    rendered.append(f"--{item.name}={value}")
                    continue
            elif type(item) is _Positional:
                value = regular[item.index]
                if type(value) is str:
                    rendered.append(value)
                    continue
            return self.to_list(plain_escaper)  # anything else (bool, None, lists, paths...)
        return rendered

    def to_dict(self, kwargs_only: bool = False) -> dict[str, Any]:
        """XManager's dict view: keyword args by name; each positional arg maps to True."""
        if kwargs_only:
            return dict(self.keyword_args)
        from xcore.model.utils import ShellSafeArg

        result: dict[str, Any] = {}
        for item in self._items:
            if isinstance(item, _Positional):
                value = self.regular_args[item.index]
                result[value.arg if isinstance(value, ShellSafeArg) else str(value)] = True
            else:
                result[item.name] = self.keyword_args[item.name]
        return result

    def to_stored(self) -> dict[str, Any] | list[Any]:
        """The JSON-ready form ``xcore show`` lists: a dict, or a list when there are positionals."""
        if not self.regular_args:
            return dict(self.keyword_args)
        return [
            self.regular_args[i.index] if isinstance(i, _Positional) else {i.name: self.keyword_args[i.name]}
            for i in self._items
        ]

    def rewrite_args(self, rewrite: Callable[[str], str]) -> SequentialArgs:
        """A copy with ``rewrite`` applied to every str value (positional or keyword)."""
        result = SequentialArgs()
        for item in self._items:
            if isinstance(item, _Positional):
                value = self.regular_args[item.index]
                result._add_positional(rewrite(value) if isinstance(value, str) else value)
            else:
                value = self.keyword_args[item.name]
                result._set_keyword(item.name, rewrite(value) if isinstance(value, str) else value)
        return result

    def remove_args(self, removed_args: str) -> SequentialArgs:
        """A copy without the keyword arg named ``removed_args`` and without positional args
        equal to that string."""
        result = SequentialArgs()
        for item in self._items:
            if isinstance(item, _Positional):
                value = self.regular_args[item.index]
                if not (isinstance(value, str) and value == removed_args):
                    result._add_positional(value)
            elif item.name != removed_args:
                result._set_keyword(item.name, self.keyword_args[item.name])
        return result

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SequentialArgs):
            return NotImplemented
        return self._entries() == other._entries()

    def _entries(self) -> list[tuple[str, Any]]:
        return [
            ("", self.regular_args[i.index]) if isinstance(i, _Positional) else (i.name, self.keyword_args[i.name])
            for i in self._items
        ]

    def __repr__(self) -> str:
        return f"[{', '.join(self.to_list(repr))}]"

    def validate(self) -> None:
        """Check every value with ``check_arg_value``, naming the argument at fault."""
        keywords = self.keyword_args
        for item in self._items:
            if type(item) is _Keyword:  # the common case inline: a plain name and a number or text
                value = keywords[item.name]
                kind = type(value)
                if "\0" not in item.name and (kind is int or kind is float or (kind is str and "\0" not in value)):
                    continue
            if isinstance(item, _Positional):
                check_arg_value(self.regular_args[item.index], f"Positional argument {item.index + 1}")
            else:
                check_arg_value(item.name, f"Argument name {item.name!r}")
                check_arg_value(self.keyword_args[item.name], f"Argument {item.name!r}")

    def __bool__(self) -> bool:
        return bool(self._items)


def merge_args(*collections: UserArgs) -> SequentialArgs:
    """Merge several arg collections left to right into a new SequentialArgs: positional args
    append, a keyword given again takes the new value at its first position."""
    result = SequentialArgs()
    for collection in collections:
        if collection is None:
            continue
        if isinstance(collection, SequentialArgs):  # merged in place: no intermediate copy
            result.merge(collection)
        elif type(collection) is dict:
            for key, value in collection.items():
                result._set_keyword(str(key), value)
        else:
            result.merge(SequentialArgs.from_collection(collection))
    return result
