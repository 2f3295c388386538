"""The git commit and dirty flag of the code a launch script comes from."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from xcore.model import datamodel


@datamodel.frozen
class GitState:
    commit: str
    dirty: bool


_REPOSITORY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR")


def _may_be_in_a_repository(directory: Path) -> bool:
    """False only when git certainly finds no repository from ``directory``: no ``.git`` in it
    or above, it is not in a bare repository, and no variable names a repository for git. Saves
    starting git (a fork of the launcher) for a script outside any repository."""
    if any(os.environ.get(name) for name in _REPOSITORY_VARIABLES):
        return True
    for candidate in (directory, *directory.parents):
        if os.path.lexists(candidate / ".git"):
            return True
        if os.path.isfile(candidate / "HEAD") and os.path.isdir(candidate / "objects"):
            return True  # a bare repository (or its look-alike: git decides)
    return False


def git_state(directory: Path) -> GitState | None:
    """None when ``directory`` is not in a git work tree or git is not installed."""
    if not _may_be_in_a_repository(Path(os.path.abspath(directory))):
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if commit.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return GitState(commit.stdout.strip(), bool(status.stdout.strip()))
