"""Does each speed seam still pay? Each is measured against what it replaced, in fresh child
processes, the two sides alternated, CPU time (user + system) and wall time, medians:

- entry points: ``xcore.hooks.entry_points.scan`` of the three xcore groups against
  ``importlib.metadata.entry_points`` of the same groups (every command asks which plugins exist);
- datamodel: importing the launch API and xlocal's classes with ``xcore.model.datamodel``'s
  ``define``/``frozen`` against attrs' own (swapped in before the import), for xlocal alone and
  for both (xlocal is the one plugin that uses them, through ``xcore.plugin``);
- collector: 10,000 ``experiment.add`` on the fake backend (jobs held) with
  ``collector.SWEEP_THRESHOLDS`` against Python's default thresholds.

Run from a regular (not editable) install with xlocal: PYTHON bench/bench_seams.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, load_average, temp_home, time_subprocess_cpu  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 9

GROUPS = '{"xcore", "xcore.commands", "xcore.kinds"}'
ENTRY_POINTS = {
    "xcore.hooks.entry_points.scan": f"from xcore.hooks.entry_points import scan; scan({GROUPS})",
    "importlib.metadata.entry_points": "from importlib.metadata import entry_points\n"
                                       f"for g in {GROUPS}: list(entry_points(group=g))",
}
_CORE = "import importlib, xcore, xcore.launch.registry, xcore.store.records\n"
_XLOCAL = ("for part in ('executors', 'executables', 'handles'):\n"
           "    importlib.import_module(f'xlocal.{part}')\n")
_ATTRS = "import attrs, xcore.model.datamodel as d\nd.define, d.frozen = attrs.define, attrs.frozen\n"
DATAMODEL = {
    "datamodel in the core and xlocal": _CORE + _XLOCAL,
    "datamodel in the core, attrs in xlocal": _CORE + _ATTRS + _XLOCAL,
    "attrs in the core and xlocal": _ATTRS + _CORE + _XLOCAL,
}
_ADDS = ("import sys, time, xcore as xm\n"
         "from xcore.testing import fake, plugin_host\n"
         "plugin_host({'fake': fake})\n"
         "with xm.create_experiment('adds') as e:\n"
         "    [exe] = e.package([xm.binary(fake.FakeSpec(), '/bin/true')])\n"
         "    job = xm.Job(exe, fake.FakeExecutor(hold=True))\n"
         "    start = time.process_time()\n"
         "    for i in range(10_000):\n"
         "        e.add(job, args={'args': {'i': i}})\n"
         "    print(time.process_time() - start)\n"
         "    sys.stdout.flush()\n"
         "    import os; os._exit(0)  # the adds only: not the launch of 10,000 held jobs\n")
COLLECTOR = {
    "SWEEP_THRESHOLDS (20000, 20, 20)": _ADDS,
    "default thresholds (700, 10, 10)": ("import xcore.runtime.collector as c\n"
                                         "c.SWEEP_THRESHOLDS = (700, 10, 10)\n" + _ADDS),
}


def measure_adds(cases: dict[str, str], rounds: int, env: dict[str, str], cwd: str) -> None:
    """The CPU time of the 10,000 adds themselves, as the child measures it."""
    import subprocess

    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, code in cases.items():
            out = subprocess.run([PYTHON, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, check=True)
            cpu[name].append(float(out.stdout.split()[-1]))
    print(f"\n10,000 adds on the fake backend, the adds' own CPU (median of {rounds}, alternated; "
          f"load {load_average()})")
    first = statistics.median(cpu[next(iter(cases))])
    for name in cases:
        median = statistics.median(cpu[name])
        print(f"  {name:40s} CPU {median * 1000:8.1f} ms  ({median / 10_000 * 1e6:5.1f} us per add)  "
              f"x{median / first:.2f}")


def measure(title: str, cases: dict[str, str], rounds: int, env: dict[str, str], cwd: str) -> None:
    argvs = {name: [PYTHON, "-c", code] for name, code in cases.items()}
    for argv in argvs.values():
        time_subprocess_cpu(argv, env, cwd)  # warm-up: page cache, .pyc files
    wall: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, argv in argvs.items():
            w, c = time_subprocess_cpu(argv, env, cwd)
            wall[name].append(w)
            cpu[name].append(c)
    print(f"\n{title} (median of {rounds}, alternated; load {load_average()})")
    first = next(iter(cases))
    for name in cases:
        ratio = statistics.median(cpu[name]) / statistics.median(cpu[first])
        print(f"  {name:40s} CPU {statistics.median(cpu[name]) * 1000:8.1f} ms  "
              f"wall {statistics.median(wall[name]) * 1000:8.1f} ms  CPU x{ratio:.2f}")


def main() -> int:
    with temp_home() as tmp:
        env = {**os.environ, "XCORE_QUIET": "1"}
        cwd = tempfile.mkdtemp(dir=tmp)
        measure("python -c pass", {"python -c pass": "pass"}, ROUNDS, env, cwd)
        measure("entry points of the xcore groups", ENTRY_POINTS, ROUNDS, env, cwd)
        measure("launch API and plugin classes imported", DATAMODEL, ROUNDS, env, cwd)
        measure_adds(COLLECTOR, max(3, ROUNDS // 2), env, cwd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
