"""A local sweep of N jobs through the real CLI against plain `subprocess` at the same concurrency.

xcore side: `xcore launch SCRIPT --wait` in a subprocess; the script adds N work units, each
one `xm.Job` of `xm.binary(xlocal.Local.Spec(), "/bin/true")` with a distinct arg, and the
CLI waits until every job has ended. Baseline: a fresh Python process that runs the same N
commands with `subprocess.run` from a pool of SLOTS threads. XLOCAL_SLOTS is set to SLOTS
for both. Each side is run REPEATS times, alternating, and the median wall time is kept.
For information, a second baseline (the same pool, each job's output to its own new file in
a fresh directory, as xcore's jobs log) shows the disk's share of the floor.

Targets (issue 14): xcore wall time / baseline wall time <= 3 at 20 units, <= 1.5 at 2,000
(below 1,000 units the 3x target is shown); launcher time per `experiment.add` < 2 ms (the N
add() calls, timed inside the script). CPU time (user+system of each side's process tree) and
the load average are printed too: on a loaded machine wall time mostly measures waiting for a core.
The bench becomes a child subreaper, so the launcher's detached runner is reaped here and the
CPU of the whole xcore tree (launcher, runner, jobs) is printed next to the baseline's.

Run: .venv/bin/python bench/bench_local_sweep.py [N] [REPEATS]
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, XCORE_BIN, load_average, temp_home, verdict  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
SLOTS = os.cpu_count() or 1
PROGRAM = "/bin/true"

LAUNCH_SCRIPT = textwrap.dedent(
    """
    import json, os, time
    t_start = time.time()
    import xcore as xm
    import xlocal

    n = int(os.environ["BENCH_N"])
    with xm.create_experiment("bench-local-sweep") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), os.environ["BENCH_PROGRAM"])])
        executor = xlocal.Local()
        t_add0 = time.time()
        for i in range(n):
            experiment.add(xm.Job(exe, executor, args={"seed": i}))
        t_add1 = time.time()
    t_exit = time.time()
    with open(os.environ["BENCH_RESULT"], "w") as f:
        json.dump({"start": t_start, "add0": t_add0, "add1": t_add1, "exit": t_exit}, f)
    """
)

BASELINE_SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys, tempfile
    from concurrent.futures import ThreadPoolExecutor
    n, slots, program = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    logs = tempfile.mkdtemp(dir=sys.argv[4]) if len(sys.argv) > 4 else None  # each job's output to its own file

    def run(i):
        if logs is None:
            return subprocess.run([program, f"--seed={i}"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.STDOUT, start_new_session=True).returncode
        fd = os.open(os.path.join(logs, f"{i}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            return subprocess.run([program, f"--seed={i}"], stdin=subprocess.DEVNULL, stdout=fd,
                                  stderr=subprocess.STDOUT, start_new_session=True).returncode
        finally:
            os.close(fd)

    with ThreadPoolExecutor(slots) as pool:
        codes = list(pool.map(run, range(n)))
    assert codes == [0] * n, "some baseline jobs failed"
    """
)


def run_xcore(tmp: Path, index: int) -> dict[str, float]:
    script = tmp / "launch_sweep.py"
    script.write_text(LAUNCH_SCRIPT)
    result = tmp / f"result-{index}.json"
    env = {**os.environ, "BENCH_N": str(N), "BENCH_PROGRAM": PROGRAM, "BENCH_RESULT": str(result),
           "XLOCAL_SLOTS": str(SLOTS)}
    cpu0 = _children_cpu()
    t0 = time.time()
    # --wait must come before the script: after it, argparse REMAINDER hands it to the script.
    proc = subprocess.run([XCORE_BIN, "launch", "--wait", str(script)], env=env, cwd=tmp,
                          capture_output=True, text=True)
    t1 = time.time()
    cpu = _children_cpu() - cpu0  # the launcher and what it waited for; the detached runner is not counted
    tree_cpu = _reap_orphans() - cpu0  # ... and with the runner (and so its jobs), once it exited
    if proc.returncode != 0:
        raise SystemExit(f"xcore launch failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}")
    marks = json.loads(result.read_text())
    return {
        "total": t1 - t0,
        "startup": marks["start"] - t0,
        "create+package": marks["add0"] - marks["start"],
        "adds": marks["add1"] - marks["add0"],
        "launch (exit of with)": marks["exit"] - marks["add1"],
        "wait + exit": t1 - marks["exit"],
        "cpu": cpu,
        "tree cpu": tree_cpu,
    }


def _become_subreaper() -> bool:
    """Orphans of our children (the launcher's detached runner) become our children, so their
    CPU time (the jobs' included: the runner reaps them) is counted when we reap them."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _reap_orphans(secs: float = 60.0) -> float:
    """Wait for the runner to exit (it does once its launcher is gone and its jobs ended)."""
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.01)
    return _children_cpu()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_baseline(tmp: Path, with_logs: bool = False) -> tuple[float, float]:
    """(wall, CPU) seconds of the thread-pool baseline, its jobs included. ``with_logs``: each
    job's output goes to its own new file in a fresh directory, as xcore's jobs do (the disk's
    share of the floor; informational, the target's reference is the plain baseline)."""
    script = tmp / "baseline.py"
    script.write_text(BASELINE_SCRIPT)
    env = {**os.environ, "XLOCAL_SLOTS": str(SLOTS)}
    logs = [str(tmp)] if with_logs else []
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    subprocess.run([PYTHON, str(script), str(N), str(SLOTS), PROGRAM, *logs], env=env, cwd=tmp, check=True)
    return time.perf_counter() - t0, _children_cpu() - cpu0


def check_store(home: Path) -> dict[str, int]:
    db = sqlite3.connect(home / "xcore.db")
    try:
        return dict(db.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall())
    finally:
        db.close()


def main() -> int:
    xcore_runs: list[dict[str, float]] = []
    baseline_runs: list[float] = []
    baseline_cpu: list[float] = []
    logged_runs: list[tuple[float, float]] = []
    subreaper = _become_subreaper()
    load_before = load_average()
    with temp_home() as tmp:
        for index in range(REPEATS):
            wall, cpu = run_baseline(tmp)
            baseline_runs.append(wall)
            baseline_cpu.append(cpu)
            xcore_runs.append(run_xcore(tmp, index))
            logged_runs.append(run_baseline(tmp, with_logs=True))
        counts = check_store(Path(os.environ["XCORE_HOME"]))

    print(f"local sweep: {N} x {PROGRAM}, XLOCAL_SLOTS={SLOTS}, {REPEATS} runs each (median), "
          f"load average {load_before} -> {load_average()}")
    base = statistics.median(baseline_runs)
    total = statistics.median(r["total"] for r in xcore_runs)
    runs = ", ".join(f"{x:.2f}" for x in baseline_runs)
    print(f"  baseline (subprocess, {SLOTS} threads)   {base:7.2f} s   runs: {runs}")
    runs = ", ".join(f"{r['total']:.2f}" for r in xcore_runs)
    print(f"  xcore launch --wait                   {total:7.2f} s   runs: {runs}")
    logged = statistics.median(wall for wall, _ in logged_runs)
    runs = ", ".join(f"{wall:.2f}" for wall, _ in logged_runs)
    print(f"  (baseline, each job's output to its own new file: {logged:.2f} s, CPU "
          f"{statistics.median(cpu for _, cpu in logged_runs):.3f} s, runs: {runs}; xcore/this = {total / logged:.2f})")
    print(f"  CPU (user+system): baseline {statistics.median(baseline_cpu):.3f} s, "
          f"xcore launcher {statistics.median(r['cpu'] for r in xcore_runs):.3f} s (without the detached runner)")
    if subreaper:
        tree = [r["tree cpu"] for r in xcore_runs]
        runs = ", ".join(f"{x:.2f}" for x in tree)
        print(f"  CPU of the whole xcore tree (launcher, runner, jobs): {statistics.median(tree):.3f} s (runs: {runs}; "
              f"baseline: {', '.join(f'{x:.2f}' for x in baseline_cpu)})")
    print("  xcore phases (median s):")
    for phase in xcore_runs[0]:
        if phase not in ("total", "cpu", "tree cpu"):
            print(f"    {phase:24s} {statistics.median(r[phase] for r in xcore_runs):7.3f}")
    per_add_ms = statistics.median(r["adds"] for r in xcore_runs) / N * 1000
    print(f"  store job statuses after all runs: {counts} (expected COMPLETED={N * REPEATS})")
    ratio = total / base
    print()
    ok_store = counts.get("COMPLETED", 0) == N * REPEATS and len(counts) == 1
    print(f"[{verdict(ok_store)}] every job recorded COMPLETED")
    target = 3.0 if N < 1000 else 1.5
    pairs = [r["total"] / b for r, b in zip(xcore_runs, baseline_runs, strict=True)]
    print(f"[{verdict(ratio <= target)}] sweep ratio xcore/baseline = {ratio:.2f} (target <= {target:g}; "
          f"load average {load_before} -> {load_average()})")
    shown = ", ".join(f"{x:.2f}" for x in pairs)
    print(f"[{verdict(statistics.median(pairs) <= target)}] median of the {len(pairs)} alternated pairs' ratios = "
          f"{statistics.median(pairs):.2f} (issue 31 target <= {target:g}; pairs: {shown})")
    print(f"[{verdict(per_add_ms < 2)}] launcher time per add = {per_add_ms:.3f} ms (target < 2 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
