"""Helpers for testing xcore and its plugins with real services.

``require_service`` makes a test that needs a real service (Slurm, dockerd, sshd, ...)
fail in CI (``XCORE_REQUIRE_INFRA=1``) and skip, with the reason, elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable


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
