"""Plain-text tables and human-friendly times for the CLI."""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Sequence

from xcore.progress import plural

__all__ = ["format_duration", "format_time", "plural", "printable", "render_table"]

# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what a terminal shows.
# (compiled on first use: text that is all printable never needs it)
_UNPRINTABLE = "[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


@functools.cache
def _unprintable() -> re.Pattern[str]:
    return re.compile(_UNPRINTABLE)


def printable(text: object) -> str:
    """User-provided text made safe for a terminal: control characters (escape sequences,
    newlines, bidi overrides) are shown as ``\\x1b``-style escapes instead of acting."""
    value = str(text)
    if value.isprintable():  # every character matched below is a control or format one, not printable
        return value
    return _unprintable().sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                                     else f"\\u{ord(m.group()):04x}"), value)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, max_width: int | None = None) -> str:
    """Left-aligned columns, every cell escaped with ``printable``. On a terminal the last
    column is cut to its width; piped output is never cut."""
    cells = [[printable(h) for h in headers]] + [_printable_row(row) for row in rows]
    widths = [max(map(len, column)) for column in zip(*cells, strict=True)]
    if max_width is None and sys.stdout.isatty():
        import shutil  # only for a terminal: shutil imports bz2/lzma, which `xcore list | cat` never needs

        max_width = shutil.get_terminal_size((120, 20)).columns
    width = max_width or 0
    fixed = sum(widths[:-1]) + 2 * (len(widths) - 1)
    if width:
        widths[-1] = max(len(headers[-1]), min(widths[-1], width - fixed)) if width > fixed + 8 else widths[-1]
    line = "  ".join([f"{{:<{w}}}" for w in widths[:-1]] + ["{}"]).format  # each cell padded as str.ljust
    cut = widths[-1]
    lines = []
    for row in cells:
        last = row[-1]
        if len(last) > cut:
            row = [*row[:-1], last[: max(cut - 1, 0)] + "…"]
        lines.append(line(*row).rstrip())
    return "\n".join(lines)


def _printable_row(row: Sequence[object]) -> list[str]:
    """``printable`` of each cell (None as ""), checking the whole row at once: the common row
    is all printable (10,000 rows of ``xcore show`` were 90,000 checks)."""
    texts = ["" if c is None else c if type(c) is str else str(c) for c in row]
    return texts if "".join(texts).isprintable() else [printable(t) for t in texts]


def id_ranges(ids: Sequence[int]) -> str:
    """Ids as runs: ``1-1000`` or ``1, 5-7, 9`` (a retried 1,000-unit sweep is one line)."""
    runs: list[list[int]] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def format_duration(seconds: float | None) -> str:
    """A duration as read at a glance: milliseconds below a second (a 34 ms job read
    ``0.0s``), tenths of a second below a minute, then minutes and hours."""
    if seconds is None:
        return "-"
    if round(seconds * 1000) < 1000:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_time(timestamp: float | None) -> str:
    if not timestamp:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))
