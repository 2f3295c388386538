"""A sweep is one submission however busy the machine is (issue 13, item 6), on the real Slurm."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import require_service
from xhpc_helpers import HOW, cluster_toml, service_up

pytestmark = pytest.mark.infra("slurm")

SWEEP = 2000
LOAD_PROCESSES = 4  # busy loops competing with the launch script for the 2 cores


@pytest.fixture
def cpu_load():
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(LOAD_PROCESSES)]
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def test_slurm_sweep_under_cpu_load_is_one_array_job(xcore_env: Path, cpu_load: list) -> None:
    require_service("slurm", lambda: service_up("slurm"), HOW)
    import xhpc

    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "slurm", "local", str(xcore_env / "staging"), max_array_size=SWEEP))
    started = time.monotonic()
    with xm.create_experiment(title="sweep under load") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        executor = xhpc.Slurm(cluster="test", time_limit="0:05:00")
        for i in range(SWEEP):
            experiment.add(xm.Job(exe, executor, args=[str(i)]))
    seconds = time.monotonic() - started
    jobs = [j for unit in experiment._store.work_units(experiment.experiment_id) for j in unit.jobs]
    handles = [j.handle for j in jobs]
    array_jobs = {h["job_id"] for h in handles}
    submissions = {h["run_dir"] for h in handles}  # one run directory per xcore_launch call
    try:
        report = {"adds": SWEEP, "busy-loop load processes": LOAD_PROCESSES, "seconds": round(seconds, 1),
                  "submissions": len(submissions), "array jobs": sorted(array_jobs)}
        print(f"\nbatching report: {json.dumps(report)}")
        assert len(jobs) == SWEEP and all(h is not None for h in handles)
        assert len(submissions) == 1, f"{SWEEP} adds became {len(submissions)} submissions"
        assert len(array_jobs) == 1 and "" not in array_jobs
    finally:
        ids = sorted(a for a in array_jobs if a)
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, check=False)  # only the jobs this test submitted
