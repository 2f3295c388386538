"""The contract suite against xhpc on the real Slurm and Grid Engine (login-node mode).

Opt-in for now (``XCORE_CONTRACT_XHPC=1``): on the shared test cluster one run takes about
ten minutes, too long for the default suite; wave 2 migrates xhpc onto the plugin API and
moves this run into ``.ci/run``. Observed in wave 1 (21:00, loaded machine): Slurm passes all
but the signal wording; SGE also timed out on two batches after 90 s and read a cancelled
task as UNKNOWN ("no longer known to the scheduler or its accounting")."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from xcore.testing import require_service
from xcore.testing.contract import ContractSuite, ContractTarget

pytestmark = pytest.mark.skipif(
    not os.environ.get("XCORE_CONTRACT_XHPC"),
    reason="the xhpc contract run takes ~10 min on the shared cluster: set XCORE_CONTRACT_XHPC=1")


def _ok(argv: list[str]) -> bool:
    if shutil.which(argv[0]) is None:
        return False
    try:
        return subprocess.run(argv, capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _target(scheduler: str, tmp_path, monkeypatch) -> ContractTarget:
    if scheduler == "slurm":
        require_service("slurm", lambda: _ok(["sinfo", "-h"]), "run `bash scripts/infra/setup.sh slurm` as root")
    else:
        require_service("sge", lambda: _ok(["qstat", "-g", "c"]), "run `bash scripts/infra/setup.sh sge` as root")
    import xhpc

    config = tmp_path / "xhpc-config"
    config.mkdir()
    (config / "clusters.toml").write_text(
        f'default = "test"\n[clusters.test]\nscheduler = "{scheduler}"\nlocal = true\n'
        f'staging = "{tmp_path / "staging"}"\n')
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(config))
    executor = xhpc.Slurm if scheduler == "slurm" else xhpc.GridEngine
    return ContractTarget(executor_spec=executor.Spec(), executor=lambda: executor(cluster="test"),
                          forget=None, timeout_secs=90,
                          forget_skip_reason="a test cannot purge the scheduler's accounting records")


@pytest.fixture(params=["slurm", "sge"])
def xcore_contract_target(request, tmp_path, monkeypatch):
    return _target(request.param, tmp_path, monkeypatch)


class TestXhpcLoginNode(ContractSuite):
    pass

    @pytest.mark.xfail(strict=True, reason="migrated in wave 2: xhpc words a signal exit 'killed by signal 9'; "
                       "the contract wording is 'killed by signal 9 (SIGKILL)' (xcore.plugin.exit_state)")
    def test_signal_exit_code_convention(self, launch, xcore_contract_target):
        super().test_signal_exit_code_convention(launch, xcore_contract_target)
