"""The public store contract suite (``xcore.testing.store_contract``) against every store xcore
ships: the SQLite file, SQLite in memory (``InMemoryStore``) and a real PostgreSQL."""

from __future__ import annotations

import pytest

from xcore.store import MetadataStore
from xcore.testing import InMemoryStore
from xcore.testing.store_contract import StoreContract


class TestSqliteFile(StoreContract):
    @pytest.fixture
    def xcore_store_url(self, tmp_path):
        return f"sqlite:///{tmp_path / 'contract.db'}"


class TestPostgres(StoreContract):
    @pytest.fixture
    def xcore_store_url(self, pg_url):
        return pg_url


class TestInMemory(StoreContract):
    """One store object per test, opened again by ``open``: it lives as long as the object."""

    shared = False

    @pytest.fixture
    def xcore_store_url(self):
        self.store = InMemoryStore()
        return "memory:"

    def open(self, url: str) -> MetadataStore:
        assert url == "memory:"
        return self.store

    def rows(self, url: str, sql: str) -> list[tuple] | None:
        return [tuple(row) for row in self.store._db.execute(sql)]
