"""Job arguments in list and dict form, merged like XManager's ``SequentialArgs``.

``{'lr': 0.1, 'fast': True}`` renders as ``['--lr=0.1', '--fast']``; ``False`` renders as
``--nofast`` (absl style). Later keyword values override earlier ones but keep the
first position, so merged argument lists are stable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

import attrs

UserArgs = Union[Mapping[str, Any], Iterable[Any], "SequentialArgs", None]


@attrs.frozen
class _Positional:
    index: int


@attrs.frozen
class _Keyword:
    name: str


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


_SCALARS = (str, int, float, bool, type(None), os.PathLike)


def check_arg_value(value: Any, where: str) -> None:
    """Refuse what would only reach the job as a Python ``str()``/``repr()`` (objects, bytes,
    sets) and NUL bytes, which no process can receive. ``where`` names the argument."""
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


@attrs.define
class SequentialArgs:
    """An ordered mix of positional and keyword arguments."""

    _items: list[_Positional | _Keyword] = attrs.field(factory=list)
    regular_args: list[Any] = attrs.field(factory=list)
    keyword_args: dict[str, Any] = attrs.field(factory=dict)

    @classmethod
    def from_collection(cls, collection: UserArgs) -> SequentialArgs:
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
            raise TypeError(
                f"args must be a list or a dict, got the string {collection!r}; "
                f"write [{collection!r}] for one positional argument."
            )
        for value in collection:
            result._add_positional(value)
        return result

    def _add_positional(self, value: Any) -> None:
        self._items.append(_Positional(len(self.regular_args)))
        self.regular_args.append(value)

    def _set_keyword(self, name: str, value: Any) -> None:
        if name not in self.keyword_args:
            self._items.append(_Keyword(name))
        self.keyword_args[name] = value

    def merge(self, other: SequentialArgs) -> SequentialArgs:
        """Append ``other``'s positional args; its keyword args override ours in place."""
        for item in other._items:
            if isinstance(item, _Positional):
                self._add_positional(other.regular_args[item.index])
            else:
                self._set_keyword(item.name, other.keyword_args[item.name])
        return self

    def to_list(
        self,
        escaper: Callable[[Any], str] = _plain,
        kwargs_joiner: Callable[[str, str], str] = lambda key, value: f"{key}={value}",
    ) -> list[str]:
        """Render to argv strings. The default escaper does no quoting: argv is never a shell line."""
        rendered: list[str] = []
        for item in self._items:
            if isinstance(item, _Positional):
                rendered.append(escaper(self.regular_args[item.index]))
                continue
            value = self.keyword_args[item.name]
            if value is True:
                rendered.append(escaper(f"--{item.name}"))
            elif value is False:
                rendered.append(escaper(f"--no{item.name}"))
            else:
                rendered.append(kwargs_joiner(escaper(f"--{item.name}"), escaper(value)))
        return rendered

    def to_dict(self, kwargs_only: bool = False) -> dict[str, Any] | list[Any]:
        """The JSON-ready form stored in the metadata store."""
        if kwargs_only or not self.regular_args:
            return dict(self.keyword_args)
        return [
            self.regular_args[i.index] if isinstance(i, _Positional) else {i.name: self.keyword_args[i.name]}
            for i in self._items
        ]

    def validate(self) -> None:
        """Check every value with ``check_arg_value``, naming the argument at fault."""
        for item in self._items:
            if isinstance(item, _Positional):
                check_arg_value(self.regular_args[item.index], f"Positional argument {item.index + 1}")
            else:
                check_arg_value(item.name, f"Argument name {item.name!r}")
                check_arg_value(self.keyword_args[item.name], f"Argument {item.name!r}")

    def __bool__(self) -> bool:
        return bool(self._items)


def merge_args(*collections: UserArgs) -> SequentialArgs:
    """Merge several arg collections left to right into a new SequentialArgs."""
    result = SequentialArgs()
    for collection in collections:
        result.merge(SequentialArgs.from_collection(collection))
    return result
