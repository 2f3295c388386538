"""The git commit and dirty flag of the code a launch script comes from."""

from __future__ import annotations

import subprocess
from pathlib import Path

import attrs


@attrs.frozen
class GitState:
    commit: str
    dirty: bool


def git_state(directory: Path) -> GitState | None:
    """None when ``directory`` is not in a git work tree or git is not installed."""
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
