"""The contract suite against the fake backend (and so the core's side of the contract)."""

import pytest

from xcore.testing.contract import ContractSuite


@pytest.fixture
def xcore_contract_target(xcore_fake_target):
    return xcore_fake_target


class TestFakeBackend(ContractSuite):
    pass
