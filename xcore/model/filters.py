"""The filter language of ``xcore show --where`` and the dashboard's filter box: one parser and
one matcher, so a filter selects the same work units wherever it is typed.

    lr<=0.1 loss<0.05 status=failed depth in (8,16) error~NaN name="my model"

A filter is terms joined by whitespace (all must hold; ``and`` may be written too). A term is
``NAME OP VALUE`` with ``OP`` one of ``= != < <= > >= ~ !~``, or ``NAME in (V1, V2, ...)``.
Numbers compare as numbers (``lr=0.10`` matches ``1e-1``); other values as text, quoted with
``"`` or ``'`` when they hold spaces or operators. ``~`` matches a case-insensitive substring,
or a glob when the value has ``*``, ``?`` or ``[`` (``error~"*NaN*"``). A value that is missing
(a unit without that result) fails every comparison but ``!=`` and ``!~``.

What a name means (an argument, a result, a field) is the caller's: ``Filter.matches`` is given
a lookup. A malformed filter raises ``FilterError``, one line that points at the bad token.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from xcore.errors import XcoreError

__all__ = ["MISSING", "Filter", "FilterError", "Literal", "Term", "parse"]

OPERATORS = ("<=", ">=", "!=", "!~", "=", "<", ">", "~")
MISSING: Any = object()
"""What a lookup returns for a name the unit does not have."""

CASELESS = frozenset({"status"})
"""Names whose values compare without case (``status=failed``)."""
_NAME = re.compile(r"[A-Za-z_][\w.\-/]*")
_GLOB = frozenset("*?[")


class FilterError(XcoreError):
    """A filter that cannot be read: the message names the bad token and what to write."""


@attrs.frozen
class Literal:
    """A value as typed: its text, and its number when it was written as one (unquoted)."""

    text: str
    number: float | None = None


@attrs.frozen
class Term:
    name: str
    op: str  # one of OPERATORS, or "in"
    values: tuple[Literal, ...]

    def matches(self, value: Any) -> bool:
        if value is MISSING or value is None:
            return self.op in ("!=", "!~")
        if isinstance(value, (list, tuple, set)) and not isinstance(value, str) and self.op in ("=", "~", "in"):
            return any(self.matches(v) for v in value)  # a unit's jobs' names: any of them
        caseless = self.name in CASELESS
        if self.op == "in":
            return any(_equal(value, literal, caseless) for literal in self.values)
        [literal] = self.values
        if self.op == "=":
            return _equal(value, literal, caseless)
        if self.op == "!=":
            return not _equal(value, literal, caseless)
        if self.op in ("~", "!~"):
            return _like(value, literal.text) is (self.op == "~")
        compared = _compare(value, literal)
        if compared is None:
            return False
        return {"<": compared < 0, "<=": compared <= 0, ">": compared > 0, ">=": compared >= 0}[self.op]


@attrs.frozen
class Filter:
    """A parsed filter: every term must hold."""

    terms: tuple[Term, ...]
    text: str = ""

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys(term.name for term in self.terms))

    def matches(self, lookup: Callable[[str], Any]) -> bool:
        """Whether a unit passes, ``lookup(name)`` giving its value for a name (``MISSING``
        when it has none)."""
        return all(term.matches(lookup(term.name)) for term in self.terms)


def number_of(value: Any) -> float | None:
    """``value`` as a number to compare: ints and floats, and text that reads as one
    (``"1e-1"``); never booleans or NaN."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return None if math.isnan(number) else number


def text_of(value: Any) -> str:
    """``value`` as text to compare: strings themselves, booleans as ``true``/``false``,
    numbers as Python writes them, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    import json

    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _equal(value: Any, literal: Literal, caseless: bool = False) -> bool:
    if literal.number is not None:
        number = number_of(value)
        if number is not None:
            return number == literal.number
    if isinstance(value, bool) or caseless:
        return text_of(value).casefold() == literal.text.casefold()
    return text_of(value) == literal.text


def _compare(value: Any, literal: Literal) -> int | None:
    """-1, 0 or 1 comparing ``value`` to ``literal``: as numbers when both are, as text when
    both are text, else None (no order between a number and a word)."""
    if literal.number is not None:
        number = number_of(value)
        if number is None:
            return None
        return (number > literal.number) - (number < literal.number)
    if not isinstance(value, str):
        return None
    return (value > literal.text) - (value < literal.text)


def _like(value: Any, pattern: str) -> bool:
    text, pattern = text_of(value).casefold(), pattern.casefold()
    if _GLOB & set(pattern):
        return fnmatch.fnmatchcase(text, pattern)
    return pattern in text


def parse(text: str) -> Filter:
    """``text`` as a ``Filter`` (no terms for a blank one); ``FilterError`` if malformed."""
    return Filter(tuple(_Parser(text).terms()), text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def fail(self, what: str, at: int | None = None) -> FilterError:
        at = self.at if at is None else at
        shown = self.text[at : at + 20] or "the end"
        where = f"at {shown!r} (character {at + 1})" if at < len(self.text) else "at the end"
        return FilterError(f"Bad filter {self.text!r}: {what} {where}; terms look like lr<=0.1, status=failed, "
                           f"depth in (8,16), error~NaN.")

    def skip_space(self) -> None:
        while self.at < len(self.text) and self.text[self.at].isspace():
            self.at += 1

    def terms(self) -> Iterator[Term]:
        while True:
            self.skip_space()
            if self.at >= len(self.text):
                return
            start = self.at
            match = _NAME.match(self.text, self.at)
            if match is None:
                raise self.fail("expected a name (an argument, a result, status, message, error, name or id)")
            name = match.group()
            self.at = match.end()
            if name.lower() == "and" and self._space_before_name():
                continue
            if name.lower() == "or" and self._space_before_name():
                raise self.fail("OR is not supported (terms are all required); for one name use "
                                "NAME in (A, B)", start)
            self.skip_space()
            yield self.term(name)

    def _space_before_name(self) -> bool:
        """Whether the word just read is a connective (followed by space and another name)."""
        rest = self.text[self.at :]
        return rest[:1].isspace() and _NAME.match(rest.lstrip()) is not None

    def term(self, name: str) -> Term:
        lowered = self.text[self.at : self.at + 2].lower()
        if lowered == "in" and not self.text[self.at + 2 : self.at + 3].isalnum():
            self.at += 2
            return Term(name, "in", self.in_list())
        op = next((o for o in OPERATORS if self.text.startswith(o, self.at)), None)
        if op is None:
            raise self.fail(f"expected an operator (= != < <= > >= ~ !~ or in) after {name!r}")
        self.at += len(op)
        self.skip_space()
        value = self.value(stops=" \t\r\n")
        if value is None:
            raise self.fail(f"expected a value after {name + op!r}")
        return Term(name, op, (value,))

    def in_list(self) -> tuple[Literal, ...]:
        self.skip_space()
        if not self.text.startswith("(", self.at):
            raise self.fail("expected '(' after 'in' (e.g. depth in (8,16))")
        self.at += 1
        values = []
        while True:
            self.skip_space()
            value = self.value(stops=",)")
            if value is None:
                raise self.fail("expected a value in the list")
            values.append(value)
            self.skip_space()
            if self.text.startswith(",", self.at):
                self.at += 1
                continue
            if self.text.startswith(")", self.at):
                self.at += 1
                return tuple(values)
            raise self.fail("expected ',' or ')' in the list")

    def value(self, stops: str) -> Literal | None:
        """A quoted text, or a bare word up to whitespace or one of ``stops``; None if empty."""
        text = self.text
        if self.at < len(text) and text[self.at] in "\"'":
            quote, start = text[self.at], self.at
            self.at += 1
            out = []
            while self.at < len(text) and text[self.at] != quote:
                if text[self.at] == "\\" and self.at + 1 < len(text):
                    self.at += 1
                out.append(text[self.at])
                self.at += 1
            if self.at >= len(text):
                raise self.fail(f"unclosed {quote} quote", start)
            self.at += 1
            return Literal("".join(out))
        start = self.at
        while self.at < len(text) and not text[self.at].isspace() and text[self.at] not in stops \
                and text[self.at] not in "()":
            self.at += 1
        word = text[start : self.at]
        if not word:
            return None
        if word[0] in "=<>!~":
            raise self.fail("expected a value, not another operator", start)
        return Literal(word, number_of(word) if _looks_numeric(word) else None)


def _looks_numeric(word: str) -> bool:
    """A number as typed (``0.1``, ``1e-1``, ``-3``, ``inf``): not words like ``nan``."""
    return number_of(word) is not None and word.strip().lower().lstrip("+-") not in ("nan",)
