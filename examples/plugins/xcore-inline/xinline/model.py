from __future__ import annotations

from typing import ClassVar

import attrs

from xcore.execution import JobHandle
from xcore.job_blocks import Executable, Executor, ExecutorSpec


@attrs.frozen
class InlineSpec(ExecutorSpec):
    pass


@attrs.define(kw_only=True)
class Inline(Executor):
    Spec: ClassVar[type[ExecutorSpec]] = InlineSpec
    timeout_secs: float = 600.0


@attrs.define(kw_only=True)
class InlineProcess(Executable):
    command: list[str]


@attrs.define
class InlineHandle(JobHandle):
    result_path: str
    log_path: str
