"""The contract suite against xhpc on the real Slurm and Grid Engine, in the default run.

Slurm is driven over SSH (sshd on 127.0.0.1:2222, user ``xcore``) and Grid Engine from the
login node, so both transports pass the contract. It stays fast by sharing one cluster per
scheduler across the whole module (one config, one staging directory: the probe's archive is
uploaded and unpacked once, later tests find it there) and by the core's short status polls;
each check launches at most three one-task jobs. Measured on the loaded shared machine:
Slurm over SSH 48 s for the whole class; Grid Engine about the same.

The forgotten-job check is skipped: a test cannot purge the scheduler's accounting, and xhpc
reads a job the scheduler no longer knows as ``lost: ...`` (``xhpc.tracking``), which the
unit tests of ``xhpc`` check.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from xcore.testing import require_service
from xcore.testing.contract import ContractSuite, ContractTarget

SSH_KEY = "/var/lib/xcore-infra/ssh/id_ed25519"
KNOWN_HOSTS = "/var/lib/xcore-infra/ssh/known_hosts"
REMOTE_STAGING = "/home/xcore/xcore-staging"
HOW = "run `bash scripts/infra/setup.sh slurm sge sshd` as root"

#: scheduler -> how the contract reaches it: Slurm over SSH, Grid Engine from the login node.
MODES = {"slurm": "ssh", "sge": "login-node"}


def _ok(argv: list[str]) -> bool:
    if shutil.which(argv[0]) is None:
        return False
    try:
        return subprocess.run(argv, capture_output=True, timeout=15, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _ssh_ok() -> bool:
    return Path(SSH_KEY).exists() and _ok(
        ["ssh", "-p", "2222", "-i", SSH_KEY, "-o", f"UserKnownHostsFile={KNOWN_HOSTS}", "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5", "xcore@127.0.0.1", "true"])


def _require(scheduler: str) -> None:
    if scheduler == "slurm":
        require_service("slurm", lambda: _ok(["sinfo", "-h"]), HOW)
    else:
        require_service("sge", lambda: _ok(["qstat", "-g", "c"]), HOW)
    if MODES[scheduler] == "ssh":
        require_service("sshd", _ssh_ok, HOW)


@pytest.fixture(scope="module", params=sorted(MODES))
def xhpc_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cluster per scheduler for the whole module: its config directory."""
    scheduler = request.param
    _require(scheduler)
    config = tmp_path_factory.mktemp(f"xhpc-{scheduler}-config")
    lines = ['default = "contract"', "[clusters.contract]", f'scheduler = "{scheduler}"']
    if MODES[scheduler] == "ssh":
        staging = f"{REMOTE_STAGING}/contract-{uuid.uuid4().hex[:8]}"
        lines += [f'staging = "{staging}"', 'host = "127.0.0.1"', "port = 2222", 'user = "xcore"',
                  f'key = "{SSH_KEY}"', f'known_hosts = "{KNOWN_HOSTS}"']
    else:
        lines += [f'staging = "{tmp_path_factory.mktemp(f"xhpc-{scheduler}-staging")}"', "local = true"]
    (config / "clusters.toml").write_text("\n".join(lines) + "\n")
    yield config


@pytest.fixture
def xcore_contract_target(xhpc_cluster: Path, monkeypatch: pytest.MonkeyPatch) -> ContractTarget:
    import xhpc

    monkeypatch.setenv("XCORE_CONFIG_DIR", str(xhpc_cluster))
    monkeypatch.delenv("XCORE_CLUSTER", raising=False)
    executor = xhpc.Slurm if "slurm" in xhpc_cluster.name else xhpc.GridEngine
    return ContractTarget(executor_spec=executor.Spec(), executor=lambda: executor(cluster="contract"),
                          forget=None, timeout_secs=90,
                          forget_skip_reason="a test cannot purge the scheduler's accounting records")


class TestXhpc(ContractSuite):
    pass
