"""`xcore retry` of N failed Slurm tasks over SSH against a raw `ssh host sbatch --array` of N.

Issue 23's target: within 2x the raw array submission at 1,000 tasks. The N tasks run once and
fail (exit 3 on their first attempt); `xcore retry EXP --failed` then resubmits them (one array
job, the same arguments, environments read back from the cluster), timed as a fresh CLI process
(wall and CPU); the raw baseline submits a held array of N from a fresh `ssh`, a few times
around it. Each of RAW_RUNS rounds retries the same failed sweep (the store copied back), cold like
the raw side (its SSH connection closed first). Cancels only its own jobs (by their unique name). Needs
`bash scripts/infra/setup.sh slurm sshd`. Usage: python bench/bench_hpc_retry.py [N] [RAW_RUNS]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import XCORE_BIN, temp_home, time_subprocess_cpu, verdict  # noqa: E402
from bench_hpc import BENCH_NAME, cancel_own, close_shared_connections, load, raw_submit, write_config  # noqa: E402

FAILING = """
import sys
import xcore as xm
import xhpc

n = int(sys.argv[1])
program = '[ "$XCORE_ATTEMPT" -gt 1 ] || exit 3'
executor = xhpc.Slurm(cluster="slurm", job_name=sys.argv[2])
with xm.create_experiment(title="bench-retry") as experiment:
    [exe] = experiment.package([xm.Packageable(xhpc.Command([program]), xhpc.Slurm.Spec())])
    for i in range(n):
        experiment.add(xm.Job(exe, executor, args=[str(i)], env_vars={"SEED": str(i)}))
jobs = experiment.wait_until_complete(timeout=600)
failed = sum(j.status is xm.Status.FAILED for j in jobs)
print(experiment.experiment_id, failed)
"""


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    raw_runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with temp_home("xcore-bench-retry-") as tmp:
        os.environ["XHPC_SSH_CONTROL_DIR"] = str(tmp / "ctl")
        write_config(Path(os.environ["XCORE_CONFIG_DIR"]), tmp / "staging")
        (tmp / "failing.py").write_text(FAILING)
        try:
            t = time.perf_counter()
            out = subprocess.run([sys.executable, str(tmp / "failing.py"), str(n), BENCH_NAME], check=True,
                                 capture_output=True, text=True).stdout.split()
            experiment, failed = int(out[-2]), int(out[-1])
            print(f"{n} tasks ran and {failed} failed in {time.perf_counter() - t:.1f} s (load {load()})")
            # The store as the failed sweep left it: each round retries the same failed tasks anew.
            db = Path(os.environ["XCORE_HOME"]) / "xcore.db"
            saved = tmp / "failed.db"
            subprocess.run([sys.executable, "-c", "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("
                            "'VACUUM INTO ?', (sys.argv[2],))", str(db), str(saved)], check=True)
            raw, walls, cpus = [], [], []
            for _ in range(raw_runs):  # alternated; both cold: a new SSH handshake each
                raw.append(raw_submit("slurm", n)[0])
                cancel_own("slurm")
                for leftover in (db, db.with_name("xcore.db-wal"), db.with_name("xcore.db-shm")):
                    leftover.unlink(missing_ok=True)
                shutil.copyfile(saved, db)
                close_shared_connections()
                wall, cpu = time_subprocess_cpu([XCORE_BIN, "retry", str(experiment), "--failed"])
                walls.append(wall)
                cpus.append(cpu)
                cancel_own("slurm")  # the retried tasks need not run
            base, wall, cpu = statistics.median(raw), statistics.median(walls), statistics.median(cpus)
            ratio = wall / base
            print(f"xcore retry --failed of {failed} tasks, median of {raw_runs} alternated rounds: {wall:.2f} s wall "
                  f"({min(walls):.2f}-{max(walls):.2f}), {cpu:.2f} s CPU; raw ssh sbatch --array of {n}: {base:.2f} s "
                  f"({min(raw):.2f}-{max(raw):.2f}); ratio {ratio:.2f}x (target 2x) {verdict(ratio <= 2.0)}; "
                  f"load {load()}")
        finally:
            cancel_own("slurm")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
