"""The plugin author's test kit.

- ``require_service`` makes a test that needs a real service (Slurm, dockerd, sshd, ...)
  fail in CI (``XCORE_REQUIRE_INFRA=1``) and skip, with the reason, elsewhere;
  ``require_module`` does the same for a Python package CI installs (torch, jax).
- ``xcore.testing.fake``: a fake backend plugin (deterministic, controllable states).
- ``InMemoryStore`` (and ``MemoryStorePlugin`` for ``XCORE_STORE=memory:``).
- Builders: ``make_request``, ``make_launch_context``, ``make_packaging_context``,
  ``silent_progress``, ``plugin_host``.
- ``xcore.testing.images``: the engine/registry probes and image clean-up for backends that
  build images with ``xcore.images``.
- ``xcore.testing.contract``: the contract suite (``ContractSuite``, ``ContractTarget``), a
  pytest plugin every executor should pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from xcore.lazy import lazy_exports

_EXPORTS = {
    "InMemoryStore": "xcore.testing.memory_store",
    "MemoryStorePlugin": "xcore.testing.memory_store",
    "make_request": "xcore.testing.builders",
    "make_launch_context": "xcore.testing.builders",
    "make_packaging_context": "xcore.testing.builders",
    "silent_progress": "xcore.testing.builders",
    "plugin_host": "xcore.testing.builders",
    "ContractSuite": "xcore.testing.contract",
    "ContractTarget": "xcore.testing.contract",
    "StoreContract": "xcore.testing.store_contract",
}

__all__ = sorted([*_EXPORTS, "require_service", "require_module", "infra_required"])

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


def infra_required() -> bool:
    return os.environ.get("XCORE_REQUIRE_INFRA", "") not in ("", "0")


def require_service(name: str, available: Callable[[], bool] | bool, how_to_start: str = "") -> None:
    """Fail (CI) or skip (laptop) the calling test unless ``available`` says the service is up."""
    import pytest

    ok = available() if callable(available) else available
    if ok:
        return
    hint = how_to_start or f"run `sudo bash scripts/infra/setup.sh {name}`"
    message = f"{name} is not available; {hint}."
    if infra_required():
        pytest.fail(f"XCORE_REQUIRE_INFRA=1 but {message}", pytrace=False)
    pytest.skip(message)


def require_module(name: str, how_to_install: str) -> None:
    """Fail (CI) or skip (laptop) the calling test unless ``name`` is importable: CI installs it
    (``scripts/test.sh``), so its absence there is a broken setup, not a reason to test less."""
    import importlib.util

    import pytest

    if importlib.util.find_spec(name) is not None:
        return
    message = f"Python package {name} is not installed; {how_to_install}."
    if infra_required():
        pytest.fail(f"XCORE_REQUIRE_INFRA=1 but {message}", pytrace=False)
    pytest.skip(message)


def require_live_tier(name: str, available: Callable[[], bool] | bool, env_var: str, why_optional: str) -> None:
    """For a tool the project cannot install for its tests (e.g. Apptainer): run where it exists,
    else skip with ``why_optional``, also in CI; ``env_var=1`` (set where the tool is installed)
    turns the skip into a failure. Services the project can start use ``require_service``."""
    import pytest

    ok = available() if callable(available) else available
    if ok:
        return
    message = f"live tier {name}: not installed here ({why_optional})"
    if os.environ.get(env_var, "") not in ("", "0"):
        pytest.fail(f"{env_var}=1 but {message}.", pytrace=False)
    pytest.skip(f"{message}; set {env_var}=1 where it is installed to make this a failure.")


if TYPE_CHECKING:
    from xcore.testing.builders import (
        make_launch_context,
        make_packaging_context,
        make_request,
        plugin_host,
        silent_progress,
    )
    from xcore.testing.contract import ContractSuite, ContractTarget
    from xcore.testing.memory_store import InMemoryStore, MemoryStorePlugin
    from xcore.testing.store_contract import StoreContract
