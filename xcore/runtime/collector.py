"""The cyclic garbage collector's thresholds while a sweep is built.

A launch script keeps each unit's records, jobs and futures alive until its launch and makes
little cyclic garbage. With Python's default thresholds (700, 10, 10) the collector walked
those survivors again every 700 allocations: some 440 times in a 10,000-unit sweep, 13-19 us
of each add's 70-90 (issue 14). ``xcore launch`` sets ``SWEEP_THRESHOLDS`` for the whole
script; an experiment block opened elsewhere (a notebook, a plain ``python`` script) sets them
while it is open. Young garbage then waits for 20,000 allocations (a few MB at most); full
collections still follow Python's own rule (a quarter more long-lived objects).
"""

from __future__ import annotations

import gc
import threading

SWEEP_THRESHOLDS = (20_000, 20, 20)

_lock = threading.Lock()
_open = 0  # experiment blocks open in this process
_saved: tuple[int, int, int] | None = None  # the thresholds to restore when the last one closes


def block_opened() -> None:
    """Raise the thresholds while any experiment block is open, unless the script set them
    higher itself or turned automatic collection off (threshold 0)."""
    global _open, _saved
    with _lock:
        _open += 1
        current = gc.get_threshold()
        if _open == 1 and 0 < current[0] < SWEEP_THRESHOLDS[0]:
            _saved = current
            gc.set_threshold(*SWEEP_THRESHOLDS)


def block_closed() -> None:
    """The last open block closed: restore the thresholds, unless the script changed them meanwhile."""
    global _open, _saved
    with _lock:
        _open = max(0, _open - 1)
        if _open == 0 and _saved is not None:
            if gc.get_threshold() == SWEEP_THRESHOLDS:
                gc.set_threshold(*_saved)
            _saved = None
