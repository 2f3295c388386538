"""A metadata store file its owner made read-only (0444) stays so: the next command refuses
it with a message naming the mode, instead of chmod-ing it back to 0600 (issue 30)."""

from __future__ import annotations

import os
import stat

from core_helpers import run_xcore


def test_a_read_only_store_is_refused_and_left_read_only(xcore_home):
    assert run_xcore("list").returncode == 0  # makes the store
    db = xcore_home / "xcore.db"
    os.chmod(db, 0o444)
    assert run_xcore("list").returncode == 0  # the fast listing only reads it
    result = run_xcore("store", "info")
    assert stat.S_IMODE(db.stat().st_mode) == 0o444
    assert result.returncode != 0
    assert f"The metadata store {db} is read-only (mode 0444)" in result.stderr
    assert "Traceback" not in result.stderr
