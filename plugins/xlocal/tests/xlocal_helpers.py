"""Helpers of xlocal's end-to-end tests (moved from the core's tests, issue 25): each test's
own state root, and the core test helpers these tests share with it, loaded from ``tests/``
rather than copied."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]


def core_test_module(name: str) -> ModuleType:
    """``tests/NAME.py`` of the repository (the one pytest imported already, if it did)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "tests" / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_core = core_test_module("core_helpers")
run_xcore = _core.run_xcore  # the real CLI in a new process
write_script = _core.write_script  # a launch script with ``xm`` and ``xlocal`` imported

# The PostgreSQL test server's fixture (tests/pg_helpers.py), for the tests that run on both stores.
pg_url = core_test_module("pg_helpers").pg_url


@pytest.fixture
def xcore_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The core tests' isolation: own state root, config dir and plugin host."""
    yield from _core.isolated_home(tmp_path, monkeypatch)
