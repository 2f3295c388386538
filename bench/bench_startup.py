"""Startup cost: `import xcore` and `xcore --help` against a bare interpreter.

Each figure is the median of N fresh subprocesses (after one warm-up round); the cases
are interleaved round-robin so drift in machine load hits all of them alike.

Targets (from the issue):
  - `import xcore` within 60 ms of bare `python -c pass`
  - `xcore --help` under 250 ms (absolute wall time)

Run: .venv/bin/python bench/bench_startup.py [N]
"""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, XCORE_BIN, median_ms, temp_home, time_subprocess, verdict  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 21

CASES = {
    "python -c pass (baseline)": [PYTHON, "-c", "pass"],
    "import xcore": [PYTHON, "-c", "import xcore"],
    "import xcore; xcore.Job": [PYTHON, "-c", "import xcore; xcore.Job"],
    "import xcore; xcore.create_experiment": [PYTHON, "-c", "import xcore; xcore.create_experiment"],
    "import xlocal": [PYTHON, "-c", "import xlocal"],
    "import xlocal; xlocal.Local": [PYTHON, "-c", "import xlocal; xlocal.Local"],
    "xcore --help": [XCORE_BIN, "--help"],
    "xcore --version": [XCORE_BIN, "--version"],
}


def main() -> int:
    with temp_home() as tmp:
        env = dict(os.environ)
        cwd = tempfile.mkdtemp(dir=tmp)  # not the repo: no accidental imports from cwd
        for argv in CASES.values():  # warm-up: page cache, .pyc files
            time_subprocess(argv, env, cwd)
        samples: dict[str, list[float]] = {name: [] for name in CASES}
        for _ in range(N):
            for name, argv in CASES.items():
                samples[name].append(time_subprocess(argv, env, cwd))

    base = median_ms(samples["python -c pass (baseline)"])
    print(f"startup, median of {N} runs each (cpu count {os.cpu_count()})")
    print(f"{'case':40s} {'median ms':>10s} {'min ms':>8s} {'over bare':>10s} {'ratio':>6s}")
    for name, values in samples.items():
        med = median_ms(values)
        print(f"{name:40s} {med:10.1f} {min(values) * 1000:8.1f} {med - base:+10.1f} {med / base:6.2f}")

    import_over = median_ms(samples["import xcore"]) - base
    help_ms = median_ms(samples["xcore --help"])
    print()
    print(f"[{verdict(import_over <= 60)}] import xcore overhead {import_over:.1f} ms over bare python"
          " (target <= 60 ms)")
    print(f"[{verdict(help_ms < 250)}] xcore --help {help_ms:.1f} ms (target < 250 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
