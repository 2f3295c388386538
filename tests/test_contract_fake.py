"""The contract suite against the fake backend (and so the core's side of the contract)."""

import pytest

from xcore.testing import fake
from xcore.testing.contract import ContractSuite

LEFT_ACTIVE: list = []


@pytest.fixture
def xcore_contract_target(xcore_fake_target):
    return xcore_fake_target


class TestFakeBackend(ContractSuite):
    def test_a_check_leaves_a_job_active(self, launch):
        """(with the next test) what a failing check leaves running is cancelled on teardown."""
        run = launch([["sleep", "60"]], held=True)
        LEFT_ACTIVE.append(run.handle())
        assert not fake.was_cancelled(LEFT_ACTIVE[0])

    def test_the_suite_cancelled_what_the_check_left(self):
        assert LEFT_ACTIVE and fake.was_cancelled(LEFT_ACTIVE[0])
