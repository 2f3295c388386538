"""``xcore.testing.require_module``: a package CI installs (torch, jax for the all-reduce tests)
fails a test in CI when missing and skips it, with the reason, elsewhere; the all-reduce
program's expected ``via=`` follows it."""

from __future__ import annotations

import pytest

from xcore.testing import allreduce, require_module

MISSING = "xcore_no_such_package"


def test_a_missing_package_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("XCORE_REQUIRE_INFRA", "1")
    with pytest.raises(pytest.fail.Exception, match=f"XCORE_REQUIRE_INFRA=1 but Python package {MISSING} is not "
                                                    "installed; pip install it"):
        require_module(MISSING, "pip install it")
    monkeypatch.setenv("XCORE_REQUIRE_INFRA", "0")
    with pytest.raises(pytest.skip.Exception, match=f"{MISSING} is not installed; pip install it"):
        require_module(MISSING, "pip install it")
    require_module("attrs", "never needed")  # installed: nothing happens


def test_the_allreduce_program_must_use_the_framework_it_was_given(monkeypatch):
    monkeypatch.setenv("XCORE_REQUIRE_INFRA", "1")
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *args: None)  # neither is installed
    for framework in ("torch", "jax"):
        with pytest.raises(pytest.fail.Exception, match=f"Python package {framework} is not installed"):
            allreduce.expected_via(framework)
    assert allreduce.expected_via("xcore") == "tcp"
