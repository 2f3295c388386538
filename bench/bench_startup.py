"""Startup cost: `import xcore`, `xcore --help` and `xcore list` against a bare interpreter.

Each figure is the median of N fresh subprocesses (after one warm-up round); the cases are
interleaved round-robin so drift in machine load hits all of them alike. Every figure is
printed next to the baseline measured in the same run, its ratio and its target, twice: wall
time, and CPU time (user + system of the child), which is what the command costs when other
work competes for the cores (wall time then mostly measures waiting for one).

Targets (issue 14):
  - `import xcore` within 1.5x of `python -c pass`
  - `xcore --help` and `xcore list` (empty store) within 3x of `python -c pass`

Run from a regular (not editable) install: PYTHON bench/bench_startup.py [N]
"""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    PYTHON,
    XCORE_BIN,
    load_average,
    median_ms,
    temp_home,
    time_subprocess,
    time_subprocess_cpu,
    verdict,
)

N = int(sys.argv[1]) if len(sys.argv) > 1 else 21
BASELINE = "python -c pass (baseline)"

CASES = {  # name: (argv, target ratio or None)
    BASELINE: ([PYTHON, "-c", "pass"], None),
    "import xcore": ([PYTHON, "-c", "import xcore"], 1.5),
    "xcore --help": ([XCORE_BIN, "--help"], 3.0),
    "xcore list (empty store)": ([XCORE_BIN, "list"], 3.0),
    "xcore --version": ([XCORE_BIN, "--version"], None),
    "import xcore; xcore.Job": ([PYTHON, "-c", "import xcore; xcore.Job"], None),
    "import xcore; xcore.create_experiment": ([PYTHON, "-c", "import xcore; xcore.create_experiment"], None),
    "import xlocal; xlocal.Local": ([PYTHON, "-c", "import xlocal; xlocal.Local"], None),
}


def main() -> int:
    with temp_home() as tmp:
        env = dict(os.environ)
        cwd = tempfile.mkdtemp(dir=tmp)  # not the repo: no accidental imports from cwd
        for argv, _ in CASES.values():  # warm-up: page cache, .pyc files, the empty store
            time_subprocess(argv, env, cwd)
        samples: dict[str, list[float]] = {name: [] for name in CASES}
        cpu: dict[str, list[float]] = {name: [] for name in CASES}
        for _ in range(N):
            for name, (argv, _) in CASES.items():
                wall, used = time_subprocess_cpu(argv, env, cwd)
                samples[name].append(wall)
                cpu[name].append(used)

    print(f"startup, median of {N} runs each (cpu count {os.cpu_count()}, load average {load_average()})")
    for title, table in (("wall", samples), ("cpu (user+sys)", cpu)):
        base = median_ms(table[BASELINE])
        print(f"{title:40s} {'median ms':>10s} {'baseline ms':>12s} {'ratio':>6s} {'target':>7s}  verdict")
        for name, values in table.items():
            med = median_ms(values)
            target = CASES[name][1]
            ratio = med / base
            mark = "" if target is None else verdict(ratio <= target)
            shown = "" if target is None else f"{target:.1f}x"
            print(f"  {name:38s} {med:10.1f} {base:12.1f} {ratio:6.2f} {shown:>7s}  {mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
