from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# The public contract suites live in the package, not in a test module: have pytest rewrite
# their asserts too, so a failing check shows its values (before anything imports them).
pytest.register_assert_rewrite("xcore.testing.contract", "xcore.testing.store_contract")

from core_helpers import isolated_home  # noqa: E402


@pytest.fixture(autouse=True)
def xcore_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own state root, config dir and plugin host."""
    yield from isolated_home(tmp_path, monkeypatch)


# Store fixtures shared by the store test modules (real PostgreSQL server, both stores).
from pg_helpers import pg_url  # noqa: E402, F401 - fixtures, imported for pytest to find
from store_contract_helpers import store_url  # noqa: E402, F401
