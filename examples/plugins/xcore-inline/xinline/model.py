"""The example plugin's classes: an executor, its spec, a packaged executable and a handle."""

from __future__ import annotations

from typing import ClassVar

import attrs

from xcore.plugin import Executable, Executor, ExecutorSpec, JobHandle


@attrs.frozen
class InlineSpec(ExecutorSpec):
    """What ``experiment.package`` packages for: ``xinline.Inline.Spec()``."""


@attrs.define(kw_only=True)
class Inline(Executor):
    """Runs each job to completion while it is launched; gives up after ``timeout_secs``."""

    Spec: ClassVar[type[ExecutorSpec]] = InlineSpec
    timeout_secs: float = 600.0


@attrs.define(kw_only=True)
class InlineProcess(Executable):
    """A command line (the program and its fixed leading arguments) and a working directory."""

    command: list[str]
    cwd: str | None = None


@attrs.define
class InlineHandle(JobHandle):
    """Where the job's exit code was written; ``log_path`` (inherited) is its output."""

    result_path: str
