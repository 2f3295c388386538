"""What packaging for ``Local`` produces."""

from __future__ import annotations

import attrs

from xcore.plugin import Executable


@attrs.define(kw_only=True)
class LocalProcess(Executable):
    """An argv prefix to execute directly (never through a shell); job args are appended."""

    command: list[str]
    cwd: str | None = None


@attrs.define(kw_only=True)
class LocalContainer(Executable):
    """An image to run as a container on this machine's engine.

    ``entrypoint`` is the argv prefix (None: the image's own ENTRYPOINT/CMD); the job's args
    follow it as separate argv entries, never through a shell. ``image_id`` is the engine's
    id of ``image`` when it was packaged.
    """

    image: str
    entrypoint: list[str] | None = None
    image_id: str | None = None
