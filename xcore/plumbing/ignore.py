"""The one list of files never shipped with a project (to a container image, a cluster, a bucket).

They change on every local run (bytecode, tool caches), are machine-specific (virtual
environments) or are not code (version control), so shipping them would defeat content
caches and leak local state. The list is the union of what xlocal's image builder and
xhpc's packager skipped, with one judgement: ``build`` and ``dist`` are skipped only at the
project's top level (where build tools write them), since a package may well have a
``mypkg/build/`` module.

``DEFAULT_IGNORE_PATTERNS`` is the same list in ``.dockerignore`` syntax, to prepend to a
project's own ``.dockerignore`` lines; ``is_ignored`` and ``iter_project_files`` apply it
without a pattern engine.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

#: Names skipped at any depth (shell patterns on one path component).
IGNORED_ANYWHERE: tuple[str, ...] = (
    ".git", ".hg", ".svn",
    "__pycache__", "*.pyc", "*.pyo",
    ".venv", "venv", ".tox", ".nox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache",
    "*.egg-info", ".eggs", "node_modules", ".DS_Store",
)

#: Names skipped only directly under the project root.
IGNORED_AT_TOP: tuple[str, ...] = ("build", "dist")

#: Both lists in ``.dockerignore`` syntax (``**/`` for any depth).
DEFAULT_IGNORE_PATTERNS: tuple[str, ...] = tuple(f"**/{name}" for name in IGNORED_ANYWHERE) + IGNORED_AT_TOP


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def is_ignored(relpath: str) -> bool:
    """Whether ``relpath`` (``/``-separated, relative to the project root), or a directory
    above it, is on the default ignore list."""
    parts = [p for p in relpath.strip("/").split("/") if p and p != "."]
    if parts and _matches(parts[0], IGNORED_AT_TOP):
        return True
    return any(_matches(part, IGNORED_ANYWHERE) for part in parts)


def iter_project_files(root: str | os.PathLike[str]) -> Iterator[tuple[str, Path]]:
    """``(relpath, path)`` of every regular file under ``root`` that is not ignored, sorted by
    relpath, without descending into ignored directories. Symbolic links to files are included."""
    root = Path(root)
    found: list[tuple[str, Path]] = []
    for current, dirnames, filenames in os.walk(root):
        base = Path(current)
        rel_dir = base.relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = [d for d in dirnames if not is_ignored(prefix + d)]
        for filename in filenames:
            rel = prefix + filename
            path = base / filename
            if not is_ignored(rel) and path.is_file():
                found.append((rel, path))
    yield from sorted(found)
