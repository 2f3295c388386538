"""Content digests of files, remembered across runs so unchanged big files are read once.

An entry is reused only when the file's size, modification time, change time and inode are
all unchanged; any write, ``touch`` or replacement of the file misses the cache. The cache
file is written atomically (0600) and a corrupt or missing one is simply rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from xcore.plumbing.files import atomic_write


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    """The hex digest of a file's content, read in blocks."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, algorithm).hexdigest()


class DigestCache:
    """``cache.digest(path)`` returns the sha256 of ``path``, hashing only files that changed.

    ``path=None`` keeps the cache in memory for the process; with a path it is loaded from
    and ``save()``d to that JSON file (``with DigestCache(p) as cache:`` saves on exit).
    """

    VERSION = 1

    def __init__(self, path: str | os.PathLike[str] | None = None, algorithm: str = "sha256") -> None:
        self.path = Path(path) if path is not None else None
        self.algorithm = algorithm
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._entries: dict[str, list[object]] = {}
        self._dirty = False
        if self.path is not None:
            try:
                data = json.loads(self.path.read_text())
                if data.get("version") == self.VERSION and data.get("algorithm") == algorithm:
                    self._entries = dict(data["entries"])
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                self._entries = {}

    @staticmethod
    def _key(stat: os.stat_result) -> list[object]:
        return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]

    def digest(self, path: str | os.PathLike[str]) -> str:
        name = os.path.abspath(path)
        key = self._key(os.stat(name))
        with self._lock:
            cached = self._entries.get(name)
            if cached is not None and cached[:4] == key:
                self.hits += 1
                return str(cached[4])
        digest = file_digest(name, self.algorithm)
        with self._lock:
            self.misses += 1
        if self._key(os.stat(name)) != key:  # changed while we read it: do not remember
            return digest
        with self._lock:
            self._entries[name] = [*key, digest]
            self._dirty = True
        return digest

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        with self._lock:
            payload = json.dumps({"version": self.VERSION, "algorithm": self.algorithm, "entries": self._entries})
            self._dirty = False
        atomic_write(self.path, payload)

    def __enter__(self) -> DigestCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.save()
