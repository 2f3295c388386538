"""A status poll from a new process: `xcore show` of an experiment whose one job is still
running, on xlocal and on Slurm (login node: `sbatch`/`squeue` run here, no SSH; the job is
held, so it stays pending), as a user's
watch loop or a script polling `xcore show --json` does. CPU time (user+system) of the whole
process, medians of alternated runs; the baseline is `python -c pass` and the raw scheduler
query (`squeue -j ID`) in the same run.

Give more interpreters (other installs, e.g. an older xcore) to alternate them with this one:
PYTHON bench/bench_status_poll.py [REPEATS] [OTHER_PYTHON ...]. Needs Slurm (`sinfo`).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, temp_home  # noqa: E402

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 9
PYTHONS = [PYTHON, *sys.argv[2:]]
NAME = f"xcore-poll-{uuid.uuid4().hex[:12]}"  # cancel by this name only: never other users' jobs

LAUNCH = textwrap.dedent("""
    import sys
    import xcore as xm
    import xhpc
    import xlocal
    sleep = ["-c", "import time; time.sleep(600)"]
    with xm.create_experiment("poll-xlocal") as e:
        [exe] = e.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=sleep)])
        e.add(xm.Job(exe, xlocal.Local()))
    print(e.experiment_id)
    with xm.create_experiment("poll-slurm") as e:
        [exe] = e.package([xm.Packageable(xhpc.Command(["/bin/sleep", "600"]), xhpc.Slurm.Spec())])
        # held: it stays pending (unfinished, polled) and never takes a slot from other work
        e.add(xm.Job(exe, xhpc.Slurm(cluster="slurm-login", job_name=sys.argv[1], directives=["--hold"])))
    print(e.experiment_id)
""")


def cpu_of(argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    with temp_home() as tmp:
        config = Path(os.environ["XCORE_CONFIG_DIR"])
        config.mkdir(parents=True)
        (config / "clusters.toml").write_text(
            f'[clusters.slurm-login]\nscheduler = "slurm"\nlocal = true\nstaging = "{tmp / "staging"}"\n')
        ids = subprocess.run([PYTHON, "-c", LAUNCH, NAME], capture_output=True, text=True, check=True).stdout.split()
        local_id, slurm_id = ids[-2], ids[-1]
        job = subprocess.run(["squeue", "-h", "-n", NAME, "-o", "%i"], capture_output=True, text=True,
                             check=True).stdout.split()[0]
        cases: dict[str, list[str]] = {"python -c pass (baseline)": [PYTHON, "-c", "pass"],
                                       "squeue -j ID (raw Slurm query)": ["squeue", "-j", job]}
        for index, python in enumerate(PYTHONS):
            tag = "" if len(PYTHONS) == 1 else f" [{index}]"
            cli = [python, "-m", "xcore.cli.main", "show"]
            cases[f"xcore show, running xlocal job{tag}"] = [*cli, local_id]
            cases[f"xcore show, pending Slurm job{tag}"] = [*cli, slurm_id]
        try:
            for argv in cases.values():
                cpu_of(argv)  # warm-up
            samples: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(REPEATS):
                for name, argv in cases.items():
                    samples[name].append(cpu_of(argv))
        finally:
            subprocess.run([PYTHON, "-m", "xcore.cli.main", "cancel", local_id], capture_output=True)
            subprocess.run(["scancel", "-n", NAME], capture_output=True)
    print(f"status poll from a new process, CPU seconds (user+system), median of {REPEATS} alternated "
          f"(load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    for index, python in enumerate(PYTHONS):
        print(f"  [{index}] {python}")
    base = statistics.median(samples["python -c pass (baseline)"])
    for name, values in samples.items():
        cpu = statistics.median(values)
        print(f"  {name:40s} cpu {cpu:6.3f} s  ({cpu / base:5.1f}x python -c pass)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
