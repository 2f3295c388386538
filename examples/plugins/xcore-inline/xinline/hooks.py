"""Hook implementations of the example plugin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import xcore
from xcore.errors import PackagingError
from xcore.executables import Binary
from xcore.status import JobState, Status

from xinline.model import Inline, InlineHandle, InlineProcess, InlineSpec


@xcore.hookimpl
def xcore_register_kinds(registry: Any) -> None:
    registry.add("inline.Inline", Inline)
    registry.add("inline.InlineSpec", InlineSpec)
    registry.add("inline.InlineProcess", InlineProcess)
    registry.add("inline.InlineHandle", InlineHandle)


@xcore.hookimpl
def xcore_package(packageable: Any, context: Any) -> InlineProcess | None:
    spec = packageable.executable_spec
    if not isinstance(packageable.executor_spec, InlineSpec) or not isinstance(spec, Binary):
        return None
    path = shutil.which(spec.path)
    if path is None:
        raise PackagingError(f"inline: binary {spec.path!r} not found.")
    return InlineProcess(name=spec.name, command=[path], args=packageable.args, env_vars=packageable.env_vars)


@xcore.hookimpl
def xcore_launch(executor_kind: str, requests: Sequence[Any], context: Any) -> list[InlineHandle] | None:
    if executor_kind != "inline.Inline":
        return None
    handles = []
    for request in requests:
        folder = context.state_dir / request.full_name
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "output.log"
        with open(log, "wb") as out:
            proc = subprocess.run([*request.executable.command, *request.args], env={**os.environ, **request.env},
                                  stdout=out, stderr=subprocess.STDOUT, timeout=request.executor.timeout_secs)
        (folder / "result.json").write_text(json.dumps({"returncode": proc.returncode}))
        handles.append(InlineHandle(str(folder / "result.json"), str(log)))
    return handles


@xcore.hookimpl
def xcore_job_states(handle_kind: str, handles: Sequence[InlineHandle]) -> list[JobState] | None:
    if handle_kind != "inline.InlineHandle":
        return None
    states = []
    for handle in handles:
        code = json.loads(Path(handle.result_path).read_text())["returncode"]
        states.append(JobState(Status.COMPLETED if code == 0 else Status.FAILED, f"exit code {code}", code))
    return states


@xcore.hookimpl
def xcore_cancel(handle_kind: str, handles: Sequence[InlineHandle]) -> bool | None:
    return True if handle_kind == "inline.InlineHandle" else None  # jobs are finished at launch


@xcore.hookimpl
def xcore_job_logs(handle_kind: str, handle: InlineHandle, follow: bool) -> Iterator[str] | None:
    if handle_kind != "inline.InlineHandle":
        return None
    return iter([Path(handle.log_path).read_text(errors="replace")])
