"""Every tuning of the cyclic garbage collector, in one place (issue 25, item 5).

Why it pays: what xcore builds in bulk (a sweep's units, records and futures; the rows of
``xcore show``) lives until the command ends and holds no cycle, so the collector walking it
again and again finds nothing. Measured, with the command that measures it:

- ``SWEEP_THRESHOLDS`` while a sweep is built: 10,000 ``experiment.add`` on the fake backend,
  the adds' own CPU, alternated with Python's defaults (700, 10, 10) in fresh processes
  (``PYTHON bench/bench_seams.py 15``, regular install, two runs, medians of 5 and 7, load
  4.7-7.0): 40.0-40.1 against 44.9-45.0 us per add (x1.12). With the defaults the collector
  walked the survivors some 440 times in a 10,000-unit sweep (issue 14).
- ``launch_imports`` / ``script_starting``: no collection while ``xcore launch`` imports (there
  were 38, ~5 ms), and those ~100,000 objects frozen out of every later collection's way
  (``tests/test_startup.py`` checks both).
- ``freeze_survivors`` once a launch is recorded: the interpreter's last collection does not
  walk every unit on the way out (0.05 to 0.1 s at 10,000 units, issue 14).
- ``paused`` / ``resumed`` around ``xcore show``: its ~200,000 row containers are never walked.
  ``PYTHON bench/bench_show.py 10000 5`` alternated with an install whose show leaves the
  collector alone (2 pairs, load 6.7-12): ``show`` CPU 0.289-0.296 s against 0.315-0.319 s,
  ``show --json`` 0.349-0.368 s against 0.373-0.376 s (issue 14 measured a tenth of ``--json``).

- ``watch_cycle_ended`` after each ``xcore watch`` cycle: the 50,000 records, handles and states
  a watcher keeps between cycles are frozen out of the way of the collections its next cycle
  triggers (``bench/bench_watch.py``); every ``WATCH_FULL_EVERY`` cycles one full collection frees
  any cycle among what the watcher let go meanwhile.

``SWEEP_THRESHOLDS``: young garbage waits for 20,000 allocations (a few MB at most); full
collections still follow Python's own rule (a quarter more long-lived objects). ``xcore
launch`` sets them for the whole script; an experiment block opened elsewhere (a notebook, a
plain ``python`` script) sets them while it is open (``block_opened``/``block_closed``).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

SWEEP_THRESHOLDS = (20_000, 20, 20)
WATCH_FULL_EVERY = 720  # watch cycles between full collections: an hour at the default 5 s

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


def launch_imports() -> bool:
    """``xcore launch`` is about to import what its script needs, all of it living to the end:
    no collection meanwhile. Whether the collector was on (``main`` turns it on again after)."""
    was_on = gc.isenabled()
    gc.disable()
    return was_on


def script_starting() -> None:
    """Just before the launch script runs: what was imported is frozen (enabling the collector
    with it still young costs one 6 ms walk finding nothing), and the script runs with the
    sweep's thresholds."""
    gc.set_threshold(*SWEEP_THRESHOLDS)
    gc.freeze()
    gc.enable()


def freeze_survivors() -> None:
    """What exists now lives until the process ends (a recorded launch): out of every later
    collection's way, the interpreter's last one included. Objects made later are still collected."""
    gc.freeze()


@contextlib.contextmanager
def paused() -> Iterator[bool]:
    """The collector off inside the block; yields whether it was on (and is on again after)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield was_on
    finally:
        if was_on:
            gc.enable()


@contextlib.contextmanager
def resumed(was_on: bool) -> Iterator[None]:
    """Inside ``paused``: the collector as it was before, for code that may make cycles (a
    plugin's). What was made meanwhile is frozen first (moved out of every generation, at no
    cost), else the first collection would walk all of it. Frozen objects are still freed when
    unreferenced; only a cycle among them would wait for the process to end."""
    if was_on:
        gc.freeze()
        gc.enable()
    try:
        yield
    finally:
        gc.disable()


def watch_cycle_ended(cycles: int) -> None:
    """A watcher finished its ``cycles``-th cycle: what it keeps is frozen (no later collection
    walks it again); now and then everything is thawed and collected once, so a reference
    cycle among objects it dropped is freed."""
    if cycles % WATCH_FULL_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()
