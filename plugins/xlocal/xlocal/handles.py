"""Handles that find a local job again from any later process."""

from __future__ import annotations

import attrs

from xcore.execution import JobHandle


@attrs.define
class ProcessHandle(JobHandle):
    """Job ``index`` of the runner batch in ``run_dir``; its output goes to ``log_path``."""

    run_dir: str
    index: int
    log_path: str
    kill_grace_secs: float = 5.0


@attrs.define
class ContainerHandle(JobHandle):
    """A container on the engine at ``base_url``, found by ``container_id`` (or ``name``).

    ``cancel_marker`` is the file ``xcore cancel`` writes so that a stopped container reads as
    CANCELLED. ``error`` is set when the container could not be created or started; the job then
    reads as FAILED with that message.
    """

    container_id: str
    name: str
    base_url: str
    cancel_marker: str
    stop_grace_secs: float = 5.0
    error: str = ""
