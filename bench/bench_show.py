"""`xcore show` and `xcore show --json` of an experiment of N finished tasks (default 10,000)
against the raw query of the same records: a fresh Python process that selects the jobs from
the store with sqlite3 and prints them as JSON. Alternated, medians; peak memory (VmHWM).

Targets (issue 14): within 2x of the raw query; memory under 100 MiB.
Run from a regular install: PYTHON bench/bench_show.py [N] [REPEATS] [--against OTHER_PYTHON]
``--against``: another install (e.g. the code before a change) shows the same store, alternated
with this one in the same run, and the ratio of this install's CPU to the other's is printed.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, temp_home, verdict  # noqa: E402

ARGS = sys.argv[1:]
AGAINST = ARGS.pop(ARGS.index("--against") + 1) if "--against" in ARGS else None
ARGS = [a for a in ARGS if a != "--against"]
N = int(ARGS[0]) if ARGS else 10_000
REPEATS = int(ARGS[1]) if len(ARGS) > 1 else 3

FILL = """
import sys
import xcore as xm
from xcore.model.status import JobState, Status
from xcore.testing import fake, plugin_host
plugin_host({"fake": fake})
with xm.create_experiment("bench-show") as experiment:
    [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
    executor = fake.FakeExecutor(hold=True)
    for i in range(int(sys.argv[1])):
        experiment.add(xm.Job(exe, executor, args={"seed": i, "lr": 0.1}))
store = experiment._store
jobs = [j for u in store.work_units(experiment.experiment_id) for j in u.jobs]
store.record_states([(j.id, JobState(Status.COMPLETED, exit_code=0)) for j in jobs])
print(experiment.experiment_id)
"""

HWM = 'print("HWM", next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")), file=sys.stderr)'
CLI = f"""
import sys
from xcore.cli.main import main
code = main(sys.argv[1:])
{HWM}
sys.exit(code)
"""
RAW = f"""
import json, os, sqlite3, sys
db = sqlite3.connect(os.path.join(os.environ["XCORE_HOME"], "xcore.db"))
db.row_factory = sqlite3.Row
rows = [dict(r) for r in db.execute("SELECT * FROM jobs WHERE experiment_id = ? ORDER BY id", (int(sys.argv[1]),))]
sys.stdout.write(json.dumps(rows) + "\\n")
{HWM}
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str]) -> tuple[float, float, int, float]:
    """Wall seconds, peak MiB, output size and CPU seconds (user+system: on a loaded machine
    wall time mostly measures waiting for a core)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    hwm = int(next(line.split()[1] for line in out.stderr.splitlines() if line.startswith("HWM")))
    return seconds, hwm / 1024, len(out.stdout), _children_cpu() - cpu


def _output(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def main() -> int:
    with temp_home():
        experiment = subprocess.run([PYTHON, "-c", FILL, str(N)], capture_output=True, text=True,
                                    check=True).stdout.split()[-1]
        cases = {"raw sqlite3 query as JSON (baseline)": [PYTHON, "-c", RAW, experiment],
                 "xcore show": [PYTHON, "-c", CLI, "show", experiment],
                 "xcore show --json": [PYTHON, "-c", CLI, "show", experiment, "--json"]}
        if AGAINST:  # the same store shown by the other install, in the same rounds
            cases["xcore show (other install)"] = [AGAINST, "-c", CLI, "show", experiment]
            cases["xcore show --json (other install)"] = [AGAINST, "-c", CLI, "show", experiment, "--json"]
        for argv in cases.values():
            run(argv)  # warm-up
        samples: dict[str, list[tuple[float, float, int, float]]] = {name: [] for name in cases}
        for _ in range(REPEATS):
            for name, argv in cases.items():
                samples[name].append(run(argv))
        same = {name: AGAINST is not None and _output(cases[name]) == _output(cases[f"{name} (other install)"])
                for name in ("xcore show", "xcore show --json")}
    base = statistics.median(s[0] for s in samples["raw sqlite3 query as JSON (baseline)"])
    base_cpu = statistics.median(s[3] for s in samples["raw sqlite3 query as JSON (baseline)"])
    print(f"show of {N} finished tasks, median of {REPEATS} alternated (cpu count {os.cpu_count()}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    for name, values in samples.items():
        seconds = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[3] for v in values)
        memory = max(v[1] for v in values)
        size = values[-1][2] / 1e6
        mark = "" if name.endswith("(baseline)") else (
            f"[{verdict(seconds / base <= 2)}] target 2x; [{verdict(memory < 100)}] target < 100 MiB")
        print(f"  {name:38s} {seconds:7.3f} s  ratio {seconds / base:5.2f}  cpu {cpu:6.3f} s  ratio "
              f"{cpu / base_cpu:5.2f}  peak {memory:6.1f} MiB  output {size:6.2f} MB  {mark}")
    if AGAINST:
        print(f"  against {AGAINST}: this install's median over the other's")
        for name in ("xcore show", "xcore show --json"):
            mine, other = samples[name], samples[f"{name} (other install)"]
            wall = statistics.median(v[0] for v in mine) / statistics.median(v[0] for v in other)
            cpu = statistics.median(v[3] for v in mine) / statistics.median(v[3] for v in other)
            print(f"    {name:20s} wall {wall:5.3f}  cpu {cpu:5.3f}  byte-identical output {same[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
