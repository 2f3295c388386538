"""Store-neutral helpers of the store tests, from the public store contract suite
(``xcore.testing.store_contract``), and the ``store_url`` fixture: an empty store of each kind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from xcore.testing.store_contract import new_job, open_url

__all__ = ["new_job", "open_url", "store_url"]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """The URL of an empty store of each kind."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'contract.db'}"
    else:
        yield request.getfixturevalue("pg_url")
