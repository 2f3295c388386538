"""Atomic, private file writes: readers never see half a file, other users never see it at all."""

from __future__ import annotations

import os
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
    fd, tmp = _create_temp(path)
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


def _create_temp(path: Path) -> tuple[int, str]:
    """A new 0600 file next to ``path``: ``tempfile.mkstemp`` without importing tempfile (and
    with it shutil, bz2, lzma and random, several ms on every local launch)."""
    while True:
        tmp = os.path.join(path.parent, f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), tmp
        except FileExistsError:
            continue
