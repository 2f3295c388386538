"""Progress for long operations: a live line on a terminal, plain lines in logs and CI."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO


def plural(count: int, word: str) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


class Progress:
    """Reports steps like ``packaging train (3/20)`` to stderr.

    On a terminal one line is redrawn in place; elsewhere a line is printed only when its text
    changed, at most once a second per task (and always for the last step), so logs stay
    readable. ``XCORE_QUIET=1`` silences it.
    """

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = (os.environ.get("XCORE_QUIET", "") in ("", "0")) if enabled is None else enabled
        self.live = self.enabled and getattr(self.stream, "isatty", lambda: False)()
        self._last_plain: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()
        self._drawn = False

    def update(self, task: str, done: int | None = None, total: int | None = None, detail: str = "") -> None:
        if not self.enabled:
            return
        count = f" {done}/{total}" if done is not None and total else ""
        text = f"{task}{count}{(': ' + detail) if detail else ''}"
        with self._lock:
            if self.live:
                width = 100
                self.stream.write("\r\033[K" + text[:width])
                self.stream.flush()
                self._drawn = True
                return
            now = time.monotonic()
            last_time, last_text = self._last_plain.get(task, (float("-inf"), ""))
            if text == last_text:
                return  # nothing changed: a log gets no repeated line
            finished = done is not None and total is not None and done >= total
            if finished or now - last_time >= 1.0:
                self._last_plain[task] = (now, text)
                self.stream.write(text + "\n")
                self.stream.flush()

    def message(self, text: str) -> None:
        """A line that stays (finished steps, warnings)."""
        if not self.enabled:
            return
        with self._lock:
            if self._drawn:
                self.stream.write("\r\033[K")
                self._drawn = False
            self.stream.write(text + "\n")
            self.stream.flush()

    def clear(self) -> None:
        with self._lock:
            if self._drawn:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self._drawn = False
