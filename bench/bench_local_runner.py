"""The xlocal runner alone on N jobs, against plain `subprocess` at the same concurrency.

xcore side: one batch of N `/bin/true --seed=I` jobs written as `xlocal.processes.launch`
writes it (each job with its own log file under a fresh directory), run by the installed
runner as a launcher starts it for one batch (`python -P runner.py RUN_DIR LOCK_FD DONE_FD`),
until it exits. Baseline: a fresh Python process running the same N commands with
`subprocess.run` from a pool of SLOTS threads, output to /dev/null. Alternated REPEATS times.

This isolates the runner's per-job cost (spawning, log files, event lines, slot locks) from
the launcher's (start-up, adds, store), which bench_local_sweep.py measures together. CPU is
user+system of each side's whole process tree (the runner's or the pool's, with the jobs).

Run: .venv/bin/python bench/bench_local_runner.py [N] [REPEATS]
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, load_average, temp_home  # noqa: E402
from bench_local_sweep import BASELINE_SCRIPT  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
SLOTS = os.cpu_count() or 1
PROGRAM = "/bin/true"


def _tree_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _runner_path() -> str:
    code = "import xlocal.runner as r; print(r.__file__)"
    return subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def run_runner(tmp: Path, index: int, runner: str) -> tuple[float, float]:
    """(wall, CPU) seconds of the runner on one batch of N jobs, its jobs included."""
    import fcntl

    base = tmp / f"runner-{index}"
    run_dir, logs = base / "run", base / "logs"
    (run_dir / "jobs").mkdir(parents=True, mode=0o700)
    logs.mkdir(mode=0o700)
    jobs = [{"argv": [PROGRAM, f"--seed={i}"], "env": {}, "inherit_env": True, "cwd": str(tmp),
             "log_path": str(logs / f"{i + 1}-job.log"), "job_id": i} for i in range(N)]
    batch = {"cwd": str(tmp), "base_env": dict(os.environ), "jobs": jobs, "slots": SLOTS,
             "slots_dir": str(base / "slots"), "max_parallel": None}
    (run_dir / "batch.json").write_text(json.dumps(batch))
    lock = os.open(run_dir / "runner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.mkfifo(run_dir / "done.fifo", 0o600)
    done = os.open(run_dir / "done.fifo", os.O_RDWR)
    cpu0, t0 = _tree_cpu(), time.perf_counter()
    try:
        subprocess.run([PYTHON, "-P", runner, str(run_dir), str(lock), str(done)], pass_fds=(lock, done),
                       cwd="/", check=True)
    finally:
        os.close(lock)
        os.close(done)
    wall, cpu = time.perf_counter() - t0, _tree_cpu() - cpu0
    exits = [line for line in (run_dir / "events.jsonl").read_text().splitlines() if '"exit"' in line]
    if len(exits) != N or any('"rc": 0' not in line for line in exits):
        raise SystemExit(f"the runner did not end every job with 0 ({len(exits)} exits of {N})")
    return wall, cpu


def run_baseline(tmp: Path) -> tuple[float, float]:
    script = tmp / "baseline.py"
    script.write_text(BASELINE_SCRIPT)
    cpu0, t0 = _tree_cpu(), time.perf_counter()
    subprocess.run([PYTHON, str(script), str(N), str(SLOTS), PROGRAM], cwd=tmp, check=True)
    return time.perf_counter() - t0, _tree_cpu() - cpu0


def main() -> int:
    runner = _runner_path()
    load_before = load_average()
    results: dict[str, list[tuple[float, float]]] = {"baseline": [], "runner": []}
    with temp_home() as tmp:
        for index in range(REPEATS):
            results["baseline"].append(run_baseline(tmp))
            results["runner"].append(run_runner(tmp, index, runner))
    print(f"xlocal runner alone: {N} x {PROGRAM}, {SLOTS} slots, {REPEATS} runs each (median), "
          f"load average {load_before} -> {load_average()}")
    for name, rows in results.items():
        walls = ", ".join(f"{wall:.2f}" for wall, _ in rows)
        print(f"  {name:9s} wall {statistics.median(w for w, _ in rows):6.2f} s (runs: {walls}), "
              f"CPU of its process tree {statistics.median(c for _, c in rows):6.3f} s")
    ratio = statistics.median(w for w, _ in results["runner"]) / statistics.median(w for w, _ in results["baseline"])
    print(f"  runner/baseline wall = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
