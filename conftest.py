"""How the suite splits across pytest-xdist workers (``scripts/test.sh`` runs two).

Every test belongs to one of two groups, and a group runs on one worker, one test after another,
just as in a serial run. The schedulers' group holds every test that uses the real Slurm, Grid
Engine or the sshd in front of them: those tests fill the Slurm node's CPUs, preempt each other's
jobs and count what is queued, so two of them must never run at once. The other group (the core,
the fakes, xlocal, Docker, PostgreSQL, the browser) shares no service with it. Most of the
schedulers' time is spent waiting for Slurm and Grid Engine, so the two overlap well on two cores.
"""

from __future__ import annotations

from typing import Any

import pytest

SCHEDULER_TESTS = ("plugins/xhpc/tests/", "tests/test_contract_xhpc.py")


def group_of(nodeid: str) -> str:
    """The group of a test, from its id (its path relative to the repository, then ``::``)."""
    return "schedulers" if nodeid.startswith(SCHEDULER_TESTS) else "rest"


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's: pytest without xdist (nox's sessions) skips it
def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """xdist's scope scheduler with a group as the scope: it hands each scope to one worker whole.

    (xdist's own ``--dist loadgroup`` marks tests by rewriting their ids, which pytest 9.2 no
    longer allows: it would run each group's tests on both workers.)"""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)
