"""``InMemoryStore``: the metadata store in this process's memory, for unit tests.

It is the SQLite store on ``:memory:`` (the same SQL, rules and records as the store xcore
writes: ids from 1, a finished job never becomes active again, status changes appended to the
history, launcher leases, copies), so it passes the same contract suite
(``xcore.testing.store_contract``) and a test of it tests the real store.
"""

from __future__ import annotations

from typing import Any

from xcore.store import MetadataStore
from xcore.store.sqlite import SqliteStore


class InMemoryStore(SqliteStore):
    """A store of this process alone that lives as long as the object: ``close`` keeps its
    records (a test may "open" it again), and they are gone with the object. Returned records
    are copies, so tests cannot change the store by accident."""

    def __init__(self) -> None:
        super().__init__(":memory:")

    def close(self) -> None:
        """Keep the records: the connection is the store."""


class MemoryStorePlugin:
    """A plugin object that answers ``XCORE_STORE=memory:`` with one shared ``InMemoryStore``:
    ``plugin_host({"memory": MemoryStorePlugin(store)})`` and set ``XCORE_STORE=memory:``."""

    def __init__(self, store: InMemoryStore | None = None) -> None:
        self.store = store or InMemoryStore()

    from xcore.hooks.markers import hookimpl as _hookimpl

    @_hookimpl(tryfirst=True)
    def xcore_open_store(self, url: str, options: dict[str, Any]) -> MetadataStore | None:
        return self.store if url == "memory:" else None
