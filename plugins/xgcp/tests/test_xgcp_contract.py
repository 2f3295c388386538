"""The xcore plugin contract suite, run against xgcp and the fake Vertex API."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import xcore as xm
import xgcp
from xcore.testing.contract import ContractSuite, ContractTarget


@pytest.fixture
def xcore_contract_target(vertex) -> ContractTarget:
    def package(project: Path, module: str) -> xm.Packageable:
        uri = f"fake.registry/{module}:1"
        vertex.add_image(uri, [sys.executable, "-m", module], workdir=str(project))
        return xm.container(xgcp.Vertex.Spec(), uri)

    return ContractTarget(executor_spec=xgcp.Vertex.Spec(), executor=xgcp.Vertex, package=package,
                          forget=lambda handle: vertex.forget(handle.name), timeout_secs=30)


class TestVertexContract(ContractSuite):
    pass
