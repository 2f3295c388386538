"""The contract suite against the example plugin, installed as a real distribution."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from core_helpers import REPO
from xcore.testing.contract import ContractSuite, ContractTarget


@pytest.fixture(scope="module")
def inline_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("inline-site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
         "--target", str(site), str(REPO / "examples/plugins/xcore-inline")],
        check=True, capture_output=True, timeout=300,
    )
    return site


@pytest.fixture
def xcore_contract_target(inline_site, monkeypatch):
    monkeypatch.syspath_prepend(str(inline_site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(inline_site), os.environ.get("PYTHONPATH")])))
    import xinline

    def forget(handle):
        os.unlink(handle.result_path)

    return ContractTarget(
        executor_spec=xinline.Inline.Spec(), executor=lambda: xinline.Inline(timeout_secs=30), forget=forget,
        timeout_secs=30, cancel_skip_reason="inline jobs end while they are launched: nothing is left to cancel",
    )


class TestInlineExample(ContractSuite):
    pass
