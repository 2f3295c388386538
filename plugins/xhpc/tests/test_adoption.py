"""A launcher killed while submitting to Slurm: the next command adopts the array job (issue 13, item 2)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from xcore.testing import require_service
from xhpc_helpers import HOW, cluster_toml, service_up

pytestmark = pytest.mark.infra("slurm")

N = 20

SCRIPT = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    import xcore as xm
    import xhpc
    import xhpc.launch

    ctl = Path(os.environ["FI_CTL"])
    real_launch = xhpc.launch.launch

    def paused_launch(requests, context):
        handles = real_launch(requests, context)  # sbatch ran; the launcher has not recorded it yet
        (ctl / "in-flight").write_text("1")
        while True:
            time.sleep(1)

    xhpc.launch.launch = paused_launch
    with xm.create_experiment(title="killed while submitting") as experiment:
        (ctl / "experiment").write_text(str(experiment.experiment_id))
        [exe] = experiment.package([xm.Packageable(xhpc.Command(['echo "task $1"']), xhpc.Slurm.Spec())])
        executor = xhpc.Slurm(cluster="test", time_limit="0:05:00")
        for i in range(int(os.environ["FI_N"])):
            experiment.add(xm.Job(exe, executor, args=[str(i)]))
    """
)


def _xcore(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_killed_slurm_launcher_is_adopted_by_the_next_command(xcore_env: Path) -> None:
    require_service("slurm", lambda: service_up("slurm"), HOW)
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "slurm", "local", str(xcore_env / "staging")))
    ctl = xcore_env / "ctl"
    ctl.mkdir()
    script = xcore_env / "launch.py"
    script.write_text(SCRIPT)
    launcher = subprocess.Popen([sys.executable, "-m", "xcore.cli.main", "launch", str(script)],
                                env={**os.environ, "FI_CTL": str(ctl), "FI_N": str(N), "XCORE_QUIET": "1"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (ctl / "in-flight").exists():
        assert launcher.poll() is None, launcher.communicate()
        assert time.monotonic() < deadline, "the launcher never submitted"
        time.sleep(0.05)
    launcher.kill()
    launcher.wait()
    experiment = int((ctl / "experiment").read_text())
    listing = _xcore("list")
    db = sqlite3.connect(xcore_env / "home" / "xcore.db")
    handles = [json.loads(h) for (h,) in db.execute("SELECT handle FROM jobs WHERE experiment_id = ?", (experiment,))
               if h]
    db.close()
    array_jobs = sorted({h["job_id"] for h in handles})
    try:
        waited = _xcore("wait", str(experiment), "--timeout", "150")
        report = {"injected": "SIGKILL of `xcore launch` after sbatch, before the record", "units": N,
                  "adopted": len(handles), "array jobs": array_jobs, "exit code of wait": waited.returncode,
                  "resolution": listing.stderr.strip()}
        print(f"\nfault-injection report: {json.dumps(report)}")
        assert f"{N} jobs adopted, 0 marked failed to launch" in listing.stderr, listing.stderr
        assert len(handles) == N and len(array_jobs) == 1 and array_jobs[0]
        assert waited.returncode == 0, waited.stdout + waited.stderr
    finally:
        ids = [a for a in array_jobs if a]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, check=False)
