from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core_helpers import isolated_home


@pytest.fixture(autouse=True)
def xcore_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own state root, config dir and plugin host."""
    yield from isolated_home(tmp_path, monkeypatch)


# Store fixtures shared by the store test modules (real PostgreSQL server, both stores).
from pg_helpers import pg_url  # noqa: E402, F401 - fixtures, imported for pytest to find
from store_contract_helpers import store_url  # noqa: E402, F401
