"""The plugin contract suite, run against xk8s on the fake API server.

The fake's kubelet runs each pod's container command as a local process (the image is
ignored), so the probe really runs: through the Indexed Job's ConfigMap and entrypoint for
sweeps, inline for single jobs.
"""

from __future__ import annotations

import pytest

import xk8s
from xcore.testing.contract import ContractSuite, ContractTarget


@pytest.fixture
def xcore_contract_target(fake_k8s_run):
    def package(path, module):
        return xk8s.image("registry.example/probe:1", ["python3", "-m", module], env_vars={"PYTHONPATH": str(path)})

    def forget(handle):
        fake_k8s_run.delete("Job", handle.namespace, handle.job_name, "Background")

    return ContractTarget(executor_spec=xk8s.KubernetesSpec(), executor=lambda: xk8s.Kubernetes(),
                          package=package, forget=forget, timeout_secs=30)


class TestContract(ContractSuite):
    pass
