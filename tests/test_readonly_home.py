"""XCORE_HOME on a read-only file system (issue 30): one line saying what to fix, not a
51-line traceback from cleaning up files that could never be made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from xcore.testing import require_service


def test_a_read_only_xcore_home_is_one_clear_line(tmp_path: Path):
    require_service("root", os.geteuid() == 0, "run the tests as root: this one mounts a read-only tmpfs")
    mount = tmp_path / "read-only"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(mount)], check=True, timeout=30)
    try:
        result = subprocess.run([sys.executable, "-m", "xcore.cli.main", "list"], capture_output=True, text=True,
                                env={**os.environ, "XCORE_HOME": str(mount)}, timeout=60)
    finally:
        subprocess.run(["umount", str(mount)], check=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: Cannot create the metadata store {mount}/xcore.db: Read-only file system. Check that {mount} "
        "is writable and has free space, or set XCORE_HOME elsewhere."]
