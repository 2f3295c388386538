"""Why a job failed, in one line: the exception line of its last Python traceback
(``RuntimeError: NaN loss``), else the last non-empty line of its log.

Found in the tail of the log (the last ``TAIL_CHARS``) as the results reader streams it once the
job has ended (``xcore.runtime.results.collect``): no extra read, on every backend, and never
in a status refresh. The line is added to the failed job's message as ``exit code 1; error:
RuntimeError: NaN loss`` (``ERROR_MARK``), where ``show``, ``--json``, the dashboard and the
filter language (``error~NaN``) read it.
"""

from __future__ import annotations

import re

__all__ = ["ERROR_MARK", "MAX_CHARS", "TAIL_CHARS", "Tail", "error_line", "with_error"]

ERROR_MARK = "error: "
TAIL_CHARS = 64 * 1024  # what is kept of a log to find its error line
MAX_CHARS = 300  # an error line is cut to this (a message, not a log)
_TRACEBACK = "Traceback (most recent call last):"
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_RESULT = "XCORE_RESULT"


class Tail:
    """The last ``size`` characters of a stream of log chunks, kept as they are fed: the
    chunks are joined only when twice that much is held, so small chunks cost no copying."""

    def __init__(self, size: int = TAIL_CHARS) -> None:
        self.size = size
        self._parts: list[str] = []
        self._held = 0

    def feed(self, chunk: str) -> None:
        self._parts.append(chunk)
        self._held += len(chunk)
        if self._held > 2 * self.size:
            kept = "".join(self._parts)[-self.size:]
            self._parts, self._held = [kept], len(kept)

    @property
    def text(self) -> str:
        return "".join(self._parts)[-self.size:]


def _clean(line: str) -> str:
    """A log line as shown: colour codes gone, only the last state of a ``\\r``-rewritten
    line, other control characters dropped, cut to ``MAX_CHARS``."""
    line = _ANSI.sub("", line).rstrip("\r")
    line = line.rsplit("\r", 1)[-1]
    line = _CONTROL.sub("", line).strip()
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


def error_line(tail: str) -> str:
    """The error line of a log's ``tail`` ("" when the log has no non-empty line)."""
    lines = [_clean(line) for line in tail.split("\n")]
    start = max((i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)), default=None)
    if start is not None:
        raw = tail.split("\n")
        for i in range(start + 1, len(lines)):
            # the frames are indented; the exception is the first line that is not
            if lines[i] and not raw[i][:1].isspace() and not lines[i].startswith(_TRACEBACK):
                return lines[i]
    for line in reversed(lines):
        if line and not line.startswith(_RESULT):
            return line
    return ""


def with_error(message: str, line: str) -> str:
    """``message`` with the error ``line`` added (once)."""
    if not line:
        return message
    added = ERROR_MARK + line
    if message.endswith(added):
        return message
    return f"{message}; {added}" if message else added
