"""xlocal's hook implementations. Thin on purpose: work happens in modules imported inside."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from xcore.markers import hookimpl

PROCESS_HANDLE = "xlocal.ProcessHandle"


@hookimpl
def xcore_register_kinds(registry: Any) -> None:
    from xlocal import executables, executors, handles

    registry.add("xlocal.Local", executors.Local)
    registry.add("xlocal.LocalSpec", executors.LocalSpec)
    registry.add("xlocal.LocalProcess", executables.LocalProcess)
    registry.add(PROCESS_HANDLE, handles.ProcessHandle)


@hookimpl
def xcore_package(packageable: Any, context: Any) -> Any:
    from xcore.executables import Binary, PythonModule

    from xlocal.executors import LocalSpec

    if not isinstance(packageable.executor_spec, LocalSpec):
        return None
    from xlocal import packaging

    spec = packageable.executable_spec
    if isinstance(spec, Binary):
        return packaging.package_binary(packageable, spec)
    if isinstance(spec, PythonModule):
        return packaging.package_python_module(packageable, spec)
    return None


@hookimpl
def xcore_launch(executor_kind: str, requests: Sequence[Any], context: Any) -> Any:
    if executor_kind != "xlocal.Local":
        return None
    from xlocal import processes

    return processes.launch(requests, context)


@hookimpl
def xcore_job_states(handle_kind: str, handles: Sequence[Any]) -> Any:
    if handle_kind != PROCESS_HANDLE:
        return None
    from xlocal import processes

    return processes.states(handles)


@hookimpl
def xcore_cancel(handle_kind: str, handles: Sequence[Any]) -> Any:
    if handle_kind != PROCESS_HANDLE:
        return None
    from xlocal import processes

    processes.cancel(handles)
    return True


@hookimpl
def xcore_job_logs(handle_kind: str, handle: Any, follow: bool) -> Iterator[str] | None:
    if handle_kind != PROCESS_HANDLE:
        return None
    from xlocal import processes

    return processes.logs(handle, follow)
