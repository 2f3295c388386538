"""``.dockerignore`` rules with Docker's meaning.

Each non-empty line that does not start with ``#`` is a pattern relative to the context root;
``*`` and ``?`` do not cross ``/``, ``**`` matches any number of directories, ``[a-z]`` is a
character class, ``\\`` escapes. A pattern that matches a directory excludes everything under
it. A line starting with ``!`` re-includes what an earlier line excluded; the last matching
line wins (as in moby's ``patternmatcher``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from pathlib import Path

import attrs


def _translate(pattern: str) -> str:
    """A Docker ignore pattern as an anchored regular expression."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern[i + 1 : i + 2] == "*":
                while pattern[i + 1 : i + 2] == "*":
                    i += 1
                if pattern[i + 1 : i + 2] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
            else:
                out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "^" + "".join(out) + "$"


@attrs.frozen
class _Rule:
    regex: re.Pattern[str]
    exclude: bool  # False for "!pattern" lines
    text: str


class IgnoreRules:
    """Compiled ignore rules; ``IgnoreRules.from_file(path)`` reads a ``.dockerignore``."""

    def __init__(self, lines: Iterable[str] = ()) -> None:
        self._rules: list[_Rule] = []
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            exclude = not line.startswith("!")
            if not exclude:
                line = line[1:].strip()
            line = posixpath.normpath(line.lstrip("/")) if line.lstrip("/") else ""
            if line in ("", "."):
                continue
            self._rules.append(_Rule(re.compile(_translate(line), re.DOTALL), exclude, raw.strip()))

    @classmethod
    def from_file(cls, path: Path, extra: Iterable[str] = ()) -> IgnoreRules:
        """Rules from ``path`` if it exists, after the ``extra`` default lines."""
        lines = list(extra)
        try:
            lines += path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            pass
        return cls(lines)

    @property
    def has_exceptions(self) -> bool:
        """True when a ``!`` line may re-include files under an excluded directory."""
        return any(not rule.exclude for rule in self._rules)

    def excluded(self, relpath: str) -> bool:
        """Whether the file or directory ``relpath`` (``/``-separated) stays out of the context."""
        if not self._rules:
            return False
        parts = relpath.split("/")
        prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
        result = False
        for rule in self._rules:
            if any(rule.regex.match(p) for p in prefixes):
                result = rule.exclude
        return result
