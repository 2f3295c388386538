"""Store-neutral helpers for the store contract suite (SQLite and PostgreSQL alike)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from xcore.store import MetadataStore
from xcore.store.records import NewJob


def open_url(url: str, **options: object) -> MetadataStore:
    from xcore.hooks.host import PluginHost

    return PluginHost(load_entry_points=False).open_store(url, dict(options))


def new_job(name: str = "main", env: dict[str, str] | None = None) -> NewJob:
    return NewJob(name, "xlocal.Local", {"kind": "xlocal.Local"}, {"kind": "x"}, ["--a=1"], env or {"K": "v"})


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """The URL of an empty store of each kind."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'contract.db'}"
    else:
        yield request.getfixturevalue("pg_url")
