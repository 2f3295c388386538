"""What a backend tells a program about retries: its attempt number and a checkpoint directory.

Every backend exports the same two variables (``docs/long-runs.md``): ``XCORE_ATTEMPT``, the
attempt running now (1-based: ``LaunchRequest.attempt`` plus the restarts the backend made
itself), and ``XCORE_CHECKPOINT_DIR``, a directory per work unit that survives attempts, so a
program can save state before a preemption or time limit and resume from it.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

ATTEMPT_VAR = "XCORE_ATTEMPT"
CHECKPOINT_VAR = "XCORE_CHECKPOINT_DIR"


def checkpoint_dir(root: str | os.PathLike[str], experiment_id: int, work_unit_id: int) -> str:
    """``<root>/checkpoints/<experiment_id>/<work_unit_id>``: the work unit's checkpoint
    directory under a backend's private root (``LaunchContext.state_dir`` locally, the staging
    directory on a cluster). Only the path: create it (0700) where the program runs."""
    return str(PurePosixPath(os.fspath(root), "checkpoints", str(int(experiment_id)), str(int(work_unit_id))))


def attempt_env(attempt: int, checkpoint: str | None) -> dict[str, str]:
    """The variables a program of attempt ``attempt`` gets (no checkpoint variable without a directory)."""
    env = {ATTEMPT_VAR: str(int(attempt))}
    if checkpoint:
        env[CHECKPOINT_VAR] = checkpoint
    return env
