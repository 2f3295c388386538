"""``xcore shell`` into a running Slurm job over SSH: a step in the job's allocation with the
task's own environment; one command, a session typed at a terminal, and a clear message once
the job ended or on Grid Engine."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import require_service
from xcore.testing.terminal import converse
from xhpc_helpers import HOW, REMOTE_STAGING, cluster_toml, service_up

PY = sys.executable


def _configure(xcore_env: Path, scheduler: str) -> str:
    require_service(scheduler, lambda: service_up(scheduler), HOW)
    require_service("sshd", lambda: service_up("sshd"), HOW)
    staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", scheduler, "ssh", staging))
    return staging


def _xcore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "xcore.cli.main", *args], capture_output=True, text=True, timeout=120,
                          env=os.environ.copy(), check=False)


def _running(experiment: object, what: str) -> None:
    unit = experiment.work_units[1]  # type: ignore[attr-defined]
    deadline = time.monotonic() + 90
    while (status := unit.get_status().status) is not xm.Status.RUNNING:
        assert status.is_active and time.monotonic() < deadline, f"the {what} job never ran: {status}"
        time.sleep(0.2)


@pytest.mark.infra("slurm")
def test_slurm_shell_runs_in_the_jobs_allocation_and_environment(xcore_env: Path) -> None:
    import xhpc

    staging = _configure(xcore_env, "slurm")
    with xm.create_experiment(title="shell") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["sleep 300"]), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, xhpc.Slurm(), env_vars={"SHELL_WORD": "two words; $HOME"}))
    [job] = experiment._all_jobs()
    task = f"{job.handle['job_id']}_{job.handle['task']}"
    try:
        _running(experiment, "Slurm")
        real = subprocess.run(["squeue", "-h", "-j", task, "-o", "%A"], capture_output=True, text=True,
                              check=True).stdout.strip()
        target = f"{experiment.experiment_id}/1"
        done = _xcore("shell", target, "--", "printenv", "SLURM_JOB_ID")
        assert (done.returncode, done.stdout) == (0, f"{real}\n"), done.stderr
        done = _xcore("shell", target, "--", "bash", "-c", 'printf "%s|" "$SHELL_WORD" "$@"', "_", "a b", "$(id)")
        assert (done.returncode, done.stdout) == (0, "two words; $HOME|a b|$(id)|"), done.stderr
        output, code = converse([PY, "-m", "xcore.cli.main", "shell", target],
                                "echo step=$SLURM_STEP_ID; hostname; exit 4\n", env={**os.environ, "SHELL": "/bin/sh"})
        assert code == 4, output
        assert "step=" in output and socket.gethostname() in output, output
        assert _xcore("cancel", target).returncode == 0
        deadline = time.monotonic() + 60
        while "has ended (CANCELLED" not in (ended := _xcore("shell", target, "--", "true")).stderr:
            assert time.monotonic() < deadline, ended.stderr
            time.sleep(0.5)
        assert ended.returncode == 1
    finally:
        subprocess.run(["scancel", task], capture_output=True, timeout=60, check=False)
        shutil.rmtree(staging, ignore_errors=True)  # the same file system here


@pytest.mark.infra("sge")
def test_grid_engine_says_what_to_do_instead(xcore_env: Path) -> None:
    import xhpc

    staging = _configure(xcore_env, "sge")
    with xm.create_experiment(title="shell") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["sleep 300"]), xhpc.GridEngine.Spec())])
        experiment.add(xm.Job(exe, xhpc.GridEngine()))
    [job] = experiment._all_jobs()
    try:
        _running(experiment, "Grid Engine")
        done = _xcore("shell", f"{experiment.experiment_id}/1")
        assert done.returncode == 1
        assert "Grid Engine has no portable way into a running job" in done.stderr
        assert f"qstat -j {job.handle['job_id']}" in done.stderr
    finally:
        subprocess.run(["qdel", job.handle["job_id"]], capture_output=True, timeout=60, check=False)
        shutil.rmtree(staging, ignore_errors=True)
