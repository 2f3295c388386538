"""Shared by the xhpc tests (not conftest.py, whose name the core tests use too): fixtures and helpers; a cluster config per (scheduler, mode) against the real services.

Real services come from ``scripts/infra/setup.sh slurm sge sshd``: Slurm (partition debug,
with slurmdbd), SGE (queue all.q), and sshd on 127.0.0.1:2222 as user ``xcore``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from xcore.testing import require_service

SSH_KEY = "/var/lib/xcore-infra/ssh/id_ed25519"
KNOWN_HOSTS = "/var/lib/xcore-infra/ssh/known_hosts"
REMOTE_STAGING = "/home/xcore/xcore-staging"
HOW = "run `bash scripts/infra/setup.sh slurm sge sshd` as root"


def _ok(argv: list[str], timeout: float = 10) -> bool:
    if shutil.which(argv[0]) is None:
        return False
    try:
        return subprocess.run(argv, capture_output=True, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_checked: dict[str, bool] = {}


def service_up(name: str) -> bool:
    if name not in _checked:
        if name == "slurm":
            _checked[name] = _ok(["sinfo", "-h"]) and _ok(["sacct", "-n", "-X", "-S", "now"])
        elif name == "sge":
            _checked[name] = _ok(["qstat", "-g", "c"])
        elif name == "sshd":
            _checked[name] = os.path.exists(SSH_KEY) and _ok(
                ["ssh", "-p", "2222", "-i", SSH_KEY, "-o", f"UserKnownHostsFile={KNOWN_HOSTS}", "-o", "BatchMode=yes",
                 "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5", "xcore@127.0.0.1", "true"])
        else:
            _checked[name] = False
    return _checked[name]


def cluster_toml(name: str, scheduler: str, mode: str, staging: str, **extra: object) -> str:
    lines = [f"[clusters.{name}]", f'scheduler = "{scheduler}"', f'staging = "{staging}"']
    if mode == "ssh":
        lines += ['host = "127.0.0.1"', "port = 2222", 'user = "xcore"', f'key = "{SSH_KEY}"',
                  f'known_hosts = "{KNOWN_HOSTS}"']
    else:
        lines += ["local = true"]
    for key, value in extra.items():
        lines.append(f"{key} = {value!r}".replace("'", '"'))
    return "\n".join(lines) + "\n"


@pytest.fixture
def xcore_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Own XCORE_HOME and XCORE_CONFIG_DIR, a fresh plugin host and no cached SSH connections."""
    import xcore.plugins

    from xhpc import transport

    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("XCORE_CLUSTER", raising=False)
    monkeypatch.delenv("XCORE_STORE", raising=False)
    (tmp_path / "config").mkdir()
    xcore.plugins.reset_host()
    transport.reset()
    yield tmp_path
    transport.reset()
    xcore.plugins.reset_host()


@pytest.fixture(params=[("slurm", "ssh"), ("slurm", "local"), ("sge", "ssh"), ("sge", "local")],
                ids=["slurm-ssh", "slurm-login", "sge-ssh", "sge-login"])
def cluster(request: pytest.FixtureRequest, xcore_env: Path) -> dict[str, str]:
    """A configured cluster named ``test`` for one (scheduler, mode); the test's default cluster."""
    scheduler, mode = request.param
    require_service(scheduler, lambda: service_up(scheduler), HOW)
    if mode == "ssh":
        require_service("sshd", lambda: service_up("sshd"), HOW)
        staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    else:
        staging = str(xcore_env / "staging")
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", scheduler, mode, staging))
    yield {"name": "test", "scheduler": scheduler, "mode": mode, "staging": staging}
    if mode == "ssh":
        shutil.rmtree(staging, ignore_errors=True)  # same file system here; keeps the xcore home small


def executor_class(cluster: dict[str, str]) -> type:
    import xhpc

    return xhpc.GridEngine if cluster["scheduler"] == "sge" else xhpc.Slurm


def read_remote(cluster: dict[str, str], path: str) -> bytes:
    """A file on the cluster (the same file system here, readable as root)."""
    return Path(path).read_bytes()
