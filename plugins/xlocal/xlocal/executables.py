"""What packaging for ``Local`` produces."""

from __future__ import annotations

import attrs

from xcore.job_blocks import Executable


@attrs.define(kw_only=True)
class LocalProcess(Executable):
    """An argv prefix to execute directly (never through a shell); job args are appended."""

    command: list[str]
    cwd: str | None = None
