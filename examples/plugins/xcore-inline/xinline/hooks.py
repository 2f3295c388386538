"""Hook implementations of the example plugin. It imports only the public plugin API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from xcore.plugin import (
    Binary,
    JobState,
    KindRegistrar,
    LaunchContext,
    LaunchFailure,
    LaunchRequest,
    Packageable,
    PackagingContext,
    PackagingError,
    PythonModule,
    atomic_write,
    exit_state,
    follow_file,
    hookimpl,
    lost_state,
)
from xinline.model import Inline, InlineHandle, InlineProcess, InlineSpec

XCORE_PLUGIN_API = "1.0"


@hookimpl
def xcore_register_kinds(registry: KindRegistrar) -> None:
    for cls in (Inline, InlineSpec, InlineProcess, InlineHandle):
        registry.add(f"inline.{cls.__name__}", cls)


@hookimpl
def xcore_package(packageable: Packageable, context: PackagingContext) -> InlineProcess:
    spec = packageable.executable_spec
    if isinstance(spec, PythonModule):
        project = Path(spec.path).expanduser().resolve()
        if not project.is_dir():
            raise PackagingError(f"inline: python_module path {spec.path!r} is not a directory.")
        return InlineProcess(name=spec.name, command=[sys.executable, "-m", spec.module], cwd=str(project),
                             env_vars={"PYTHONPATH": str(project)})
    if isinstance(spec, Binary):
        path = shutil.which(spec.path)
        if path is None:
            raise PackagingError(f"inline: binary {spec.path!r} not found on PATH.")
        return InlineProcess(name=spec.name, command=[path])
    raise PackagingError(f"inline: cannot run {type(spec).__name__}; use xm.binary or xm.python_module.")


@hookimpl
def xcore_launch(executor_kind: str, requests: Sequence[LaunchRequest],
                 context: LaunchContext) -> list[InlineHandle | LaunchFailure]:
    results: list[InlineHandle | LaunchFailure] = []
    for request in requests:
        folder = context.state_dir / request.full_name
        folder.mkdir(parents=True, exist_ok=True)
        handle = InlineHandle(str(folder / "result.json"), log_path=str(folder / "output.log"))
        executable: InlineProcess = request.executable  # type: ignore[assignment]
        executor: Inline = request.executor  # type: ignore[assignment]
        try:
            with open(folder / "output.log", "wb") as out:
                code = subprocess.run([*executable.command, *request.args], env={**os.environ, **request.env},
                                      cwd=executable.cwd, stdout=out, stderr=subprocess.STDOUT,
                                      timeout=executor.timeout_secs, check=False).returncode
        except (OSError, subprocess.TimeoutExpired) as exc:
            results.append(LaunchFailure(f"{type(exc).__name__}: {exc}"))
            continue
        atomic_write(handle.result_path, json.dumps({"returncode": code}))
        results.append(handle)
    return results


@hookimpl
def xcore_job_states(handle_kind: str, handles: Sequence[InlineHandle]) -> list[JobState]:
    states = []
    for handle in handles:
        try:
            code = json.loads(Path(handle.result_path).read_text())["returncode"]
        except FileNotFoundError:
            states.append(lost_state(f"inline: {handle.result_path} was deleted"))
            continue
        states.append(exit_state(code))
    return states


@hookimpl
def xcore_cancel(handle_kind: str, handles: Sequence[InlineHandle]) -> bool:
    return True  # every job finished while it was launched: nothing is left to stop


@hookimpl
def xcore_job_logs(handle_kind: str, handle: InlineHandle, follow: bool) -> Iterator[str]:
    return follow_file(handle.log_path or "", follow=False)
