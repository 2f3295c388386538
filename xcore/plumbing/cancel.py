"""Cancel markers: a file that says "the user asked to stop this job".

A backend writes the marker *before* it signals the job, so that a job that dies from the
signal reads as CANCELLED (not FAILED) from any later process, and a job that has not
started yet is never started. Markers are idempotent and never removed by the core.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from xcore.plumbing.files import atomic_write


def mark_cancelled(marker: str | os.PathLike[str]) -> None:
    """Record the cancel request at ``marker`` (idempotent; the first request's time is kept)."""
    if not Path(marker).exists():
        atomic_write(marker, f"{time.time():.3f}\n")


def cancel_requested(marker: str | os.PathLike[str]) -> bool:
    """Whether a cancel was requested for the job that owns ``marker``."""
    return Path(marker).exists()


def cancelled_at(marker: str | os.PathLike[str]) -> float | None:
    """When the cancel was first requested (UNIX seconds), or None."""
    try:
        return float(Path(marker).read_text().strip() or "nan")
    except (FileNotFoundError, ValueError):
        return None
