"""Handles that find a local job again from any later process."""

from __future__ import annotations

import attrs

from xcore.plugin import JobHandle


@attrs.define
class ProcessHandle(JobHandle):
    """Job ``index`` of the runner batch in ``run_dir``; its output goes to ``log_path``."""

    run_dir: str
    index: int
    kill_grace_secs: float = 5.0


@attrs.define
class ContainerHandle(JobHandle):
    """A container on the engine at ``base_url``, found by ``container_id`` (or ``name``).

    ``cancel_marker`` is the file ``xcore cancel`` writes (``mark_cancelled``) so that a stopped
    container reads as CANCELLED. Its output is the engine's log of the container, so
    ``log_path`` is None. A container that could not be created or started is returned as a
    ``LaunchFailure`` instead; handles stored by older versions may still carry ``error``.
    """

    container_id: str
    name: str
    base_url: str
    cancel_marker: str
    stop_grace_secs: float = 5.0
