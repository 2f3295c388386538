"""Plain-text tables and human-friendly times for the CLI."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, max_width: int | None = None) -> str:
    """Left-aligned columns; the last column is cut to the terminal width."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    cells = [[c.replace("\n", "\\n") for c in row] for row in cells]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    width = max_width or shutil.get_terminal_size((120, 20)).columns
    fixed = sum(widths[:-1]) + 2 * (len(widths) - 1)
    widths[-1] = max(len(headers[-1]), min(widths[-1], width - fixed)) if width > fixed + 8 else widths[-1]
    lines = []
    for row in cells:
        last = row[-1]
        if len(last) > widths[-1]:
            last = last[: max(widths[-1] - 1, 0)] + "…"
        lines.append("  ".join([c.ljust(w) for c, w in zip(row[:-1], widths[:-1])] + [last]).rstrip())
    return "\n".join(lines)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
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
