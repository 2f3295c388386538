"""Faults during submission, on the real Slurm over SSH: never a duplicate, never unrecorded."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import xcore as xm
from xhpc_helpers import HOW, REMOTE_STAGING, cluster_toml, service_up
from xcore.testing import require_service

from xhpc import transport
from xhpc.transport import ClusterConnectionError


@pytest.fixture
def slurm_ssh(xcore_env: Path) -> str:
    require_service("slurm", lambda: service_up("slurm"), HOW)
    require_service("sshd", lambda: service_up("sshd"), HOW)
    staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", "slurm", "ssh", staging))
    return staging


def _drop_after_submit(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """The submit command runs on the cluster, then the connection 'drops' before the reply."""
    real = transport.SSHTransport.run
    dropped = [0, times]

    def run(self, command, stdin=None, timeout=None):  # type: ignore[no-untyped-def]
        result = real(self, command, stdin, timeout)
        if "sbatch" in command and dropped[0] < dropped[1]:
            dropped[0] += 1
            self._drop()
            raise ClusterConnectionError("simulated drop after sbatch", retryable=True)
        return result

    monkeypatch.setattr(transport.SSHTransport, "run", run)
    monkeypatch.setattr(transport.time, "sleep", lambda s: None)
    return dropped


def _count_jobs(name: str) -> int:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "--name", name, "-S", "now-1hour", "-o", "JobID"],
                         capture_output=True, text=True).stdout
    squeue = subprocess.run(["squeue", "-h", "-t", "all", "--name", name, "-o", "%F"], capture_output=True, text=True).stdout
    return len({line.split("_")[0] for line in (out + squeue).split() if line})


def test_dropped_reply_is_retried_without_duplicate(slurm_ssh: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import xhpc

    dropped = _drop_after_submit(monkeypatch, times=1)
    name = f"drop{uuid.uuid4().hex[:8]}"
    with xm.create_experiment(title=name) as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        for _ in range(3):
            experiment.add(xm.Job(exe, xhpc.Slurm(job_name=name)))
    assert dropped[0] == 1
    jobs = experiment.wait_until_complete(timeout=60)
    assert all(j.status is xm.Status.COMPLETED for j in jobs)
    assert len({j.handle["job_id"] for j in jobs}) == 1
    assert _count_jobs(name) == 1  # the retry found the submitted job instead of submitting again


def test_reply_lost_for_good_is_recovered_by_status(slurm_ssh: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import xhpc

    control = _drop_after_submit(monkeypatch, times=100)
    name = f"lost{uuid.uuid4().hex[:8]}"
    with xm.create_experiment(title=name) as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, xhpc.Slurm(job_name=name)))
    control[1] = 0  # the connection works again
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.handle["job_id"] == ""  # recorded as launched, id unknown at launch time...
    assert job.status is xm.Status.COMPLETED  # ...and found from chunk-0.id by the status hook
    assert _count_jobs(name) == 1


def test_unknown_host_key_is_refused(xcore_env: Path, tmp_path: Path) -> None:
    require_service("sshd", lambda: service_up("sshd"), HOW)
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "slurm", "ssh", "/tmp/x").replace(
            "/var/lib/xcore-infra/ssh/known_hosts", str(empty)))
    out = subprocess.run([sys.executable, "-m", "xcore.cli.main", "cluster", "check", "test"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "host key" in out.stdout and "ssh-keyscan" in out.stdout


def test_cluster_check_ok(slurm_ssh: str) -> None:
    out = subprocess.run([sys.executable, "-m", "xcore.cli.main", "cluster", "check", "test"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("ok ") == 3
