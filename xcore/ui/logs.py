"""A job's log as the dashboard shows it: read from the offset the page already has (a local
log file is seeked, not re-read every poll), at most ``limit`` bytes of the newest output at
once (and says so), terminal colour codes removed and ``\\r``-rewritten lines (progress bars)
shown in their last state."""

from __future__ import annotations

import functools
import os
import re
from typing import Any

# CSI (colours, cursor moves), OSC (titles, links; ended by BEL or ST), then any other two-byte escape
_ESCAPES = r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?"
# other C0 controls a terminal would act on (tab and newline kept; \r is handled per line)
_CONTROLS = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"


@functools.cache
def _cleaner() -> re.Pattern[str]:
    return re.compile(f"{_ESCAPES}|{_CONTROLS}")


def _last_state(line: str) -> str:
    """What a terminal ends up showing for a line rewritten with ``\\r``: the text after the
    last ``\\r`` (a ``\\r`` that ends the line, as in CRLF, rewrites nothing)."""
    return line.rstrip("\r").rpartition("\r")[2]


def clean(text: str) -> str:
    """Log text without escape sequences or control characters, each line in its last state."""
    text = _cleaner().sub("", text)
    if "\r" not in text:
        return text
    return "\n".join(_last_state(line) for line in text.split("\n"))


def chunk(blob: bytes, start: int, done: bool) -> dict[str, Any]:
    """The page's answer for ``blob``, the log's bytes from ``start``. Only whole lines are
    taken (``offset`` is where the next poll starts); an unfinished line is sent as
    ``partial``, shown until the next poll replaces it, so a progress bar moves."""
    cut = blob.rfind(b"\n") + 1
    whole, rest = blob[:cut], blob[cut:]
    partial = clean(rest.decode("utf-8", "replace"))
    if done and rest:  # nothing more will come: the last line is final
        return {"text": clean(blob.decode("utf-8", "replace")), "partial": "", "start": start,
                "offset": start + len(blob)}
    return {"text": clean(whole.decode("utf-8", "replace")), "partial": partial, "start": start,
            "offset": start + cut}


def _from_a_line(blob: bytes, start: int, offset: int) -> tuple[bytes, int]:
    """``blob`` (the log from ``start``) from its first whole line when bytes after ``offset``
    were skipped: the page never shows half a line, nor half a UTF-8 character."""
    if start <= offset:
        return blob, start
    newline = blob.find(b"\n")
    skip = newline + 1 if 0 <= newline < len(blob) - 1 else 0
    return blob[skip:], start + skip


def read_file(path: str, offset: int, limit: int, done: bool) -> dict[str, Any]:
    """``chunk`` of a local log file from ``offset``: only the bytes after it are read."""
    with open(path, "rb") as log:
        size = os.fstat(log.fileno()).st_size
        offset = min(offset, size)
        start = max(offset, size - limit)
        log.seek(start)
        blob = log.read(size - start)
    blob, start = _from_a_line(blob, start, offset)
    return {**chunk(blob, start, done), "size": size}


def read_text(text: str, offset: int, limit: int, done: bool) -> dict[str, Any]:
    """``chunk`` of a log a backend streamed whole (no local file to seek): offsets in bytes too."""
    data = text.encode("utf-8", "replace")
    offset = min(offset, len(data))
    start = max(offset, len(data) - limit)
    blob, start = _from_a_line(data[start:], start, offset)
    return {**chunk(blob, start, done), "size": len(data)}
