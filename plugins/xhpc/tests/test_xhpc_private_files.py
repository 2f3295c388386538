"""xhpc's local build cache is private to the user, as everything xcore writes locally (moved
from the core's tests/test_private_files.py)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A world-traversable parent (as a home directory usually is) and the common umask 022."""
    parent = Path(tempfile.mkdtemp(prefix="xhpc-private-"))
    parent.chmod(0o755)
    old = os.umask(0o022)
    yield parent
    os.umask(old)
    shutil.rmtree(parent, ignore_errors=True)


def test_cluster_build_cache_is_private(open_parent: Path) -> None:
    from xhpc.packaging import Cache

    source = open_parent / "f.txt"
    source.write_text("data")
    cache = Cache(open_parent / "cache" / "xhpc")
    cache.remember("k", cache.store_bytes(b"archive"))
    cache.file_artifact(source)
    files = [p for p in (open_parent / "cache").rglob("*")]
    assert files and {oct(stat.S_IMODE(p.stat().st_mode)) for p in files} <= {"0o700", "0o600"}
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files if p.is_file()} == {"0o600"}
