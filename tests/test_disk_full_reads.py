"""A read on a full disk: settling a killed launcher's work, which a read also does, is put
off with a warning instead of failing the read. The end-to-end check on a real full disk (new
job states not recorded) is plugins/xlocal/tests/test_local_disk_full.py."""

from __future__ import annotations

from typing import Any

import pytest

from xcore.errors import StoreFullError
from xcore.store.records import LeaseRecord

FULL = "The disk holding the metadata store /x/xcore.db is full (database or disk is full): free some space."


class _FullStore:
    """Reads work; a write fails as SQLite's does on a full disk."""

    def __init__(self, lease: LeaseRecord) -> None:
        self._lease = lease

    def leases(self) -> list[LeaseRecord]:
        return [self._lease]

    def claim_lease(self, *args: Any) -> bool:
        raise StoreFullError(FULL)


def test_a_killed_launchers_work_is_left_for_later_on_a_full_disk(capsys: pytest.CaptureFixture[str]) -> None:
    from xcore.runtime.orphans import resolve_orphans

    dead = LeaseRecord(id=1, experiment_id=7, host="elsewhere", pid=1, proc_start=None, heartbeat=0.0, state="open")
    assert resolve_orphans(_FullStore(dead), None) == []  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "experiment 7" in err and "is full" in err

