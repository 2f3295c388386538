"""What the core hands to execution hooks and what it gets back."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from xcore.job_blocks import Executable, Executor

if TYPE_CHECKING:
    from xcore.progress import Progress


@attrs.define
class JobHandle:
    """A backend's reference to one launched job, enough to find it again from a new process.

    Subclasses are attrs classes registered under a kind; they are stored as JSON.
    """


@attrs.frozen
class LaunchRequest:
    """One job to submit. ``args`` are final argv strings; ``env`` is complete and unredacted."""

    job_id: int
    experiment_id: int
    work_unit_id: int
    job_name: str
    executable: Executable
    executor: Executor
    args: list[str]
    env: dict[str, str]

    @property
    def full_name(self) -> str:
        """Unique across the store: ``<experiment>_<work unit>_<job>``."""
        return f"{self.experiment_id}_{self.work_unit_id}_{self.job_name}"


@attrs.frozen
class PackagingContext:
    """Where packaging may keep caches, and how it reports progress."""

    cache_dir: Path
    progress: Progress


@attrs.frozen
class LaunchContext:
    """Where a backend may keep state, and how it reports progress."""

    state_dir: Path
    progress: Progress
    experiment_title: str = ""
