"""Atomic, private file writes: readers never see half a file, other users never see it at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and its missing parents, each 0700 whatever the umask (``mkdir``'s
    ``parents=True`` would give the parents the umask's mode). Existing directories are left
    as they are."""
    path = Path(path)
    missing = []
    probe = path
    while not probe.is_dir() and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue  # another process made it
        os.chmod(directory, DIR_MODE)
    return path


def atomic_write(path: str | os.PathLike[str], data: bytes | str, mode: int = FILE_MODE) -> Path:
    """Write ``data`` to ``path`` so that readers see the old content or the new, never a part.

    The data goes to a temporary file in the same directory (created with ``mode``, default
    0600, never wider), is flushed to disk, then renamed over ``path``. Text is UTF-8.
    """
    path = Path(path)
    private_dir(path.parent)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path
