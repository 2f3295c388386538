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
