"""xlocal's hook implementations. Thin on purpose: work happens in modules imported inside."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from xcore.plugin import (
    Executable,
    JobHandle,
    JobState,
    KindRegistrar,
    LaunchContext,
    LaunchFailure,
    LaunchRequest,
    Packageable,
    PackagingContext,
    hookimpl,
)

XCORE_PLUGIN_API = "1.0"

PROCESS_HANDLE = "xlocal.ProcessHandle"
CONTAINER_HANDLE = "xlocal.ContainerHandle"


@hookimpl
def xcore_register_kinds(registry: KindRegistrar) -> None:
    from xlocal import executables, executors, handles

    registry.add("xlocal.Local", executors.Local)
    registry.add("xlocal.LocalSpec", executors.LocalSpec)
    registry.add("xlocal.LocalProcess", executables.LocalProcess)
    registry.add("xlocal.LocalContainer", executables.LocalContainer)
    registry.add(PROCESS_HANDLE, handles.ProcessHandle)
    registry.add(CONTAINER_HANDLE, handles.ContainerHandle)


@hookimpl
def xcore_package(packageable: Packageable, context: PackagingContext) -> Executable | None:
    from xcore.plugin import (
        BazelBinary,
        BazelContainer,
        Binary,
        Container,
        Dockerfile,
        PythonContainer,
        PythonModule,
    )
    from xlocal import packaging

    spec = packageable.executable_spec
    if isinstance(spec, BazelBinary):
        return packaging.package_bazel_binary(packageable, spec, context)
    if isinstance(spec, BazelContainer):
        return packaging.package_bazel_container(packageable, spec, context)
    if type(spec).__name__ == "PythonPackage" and hasattr(spec, "pip_args"):  # xhpc's (lxm3's) on Local
        return packaging.package_python_package(packageable, spec, context)
    if isinstance(spec, (Binary, PythonModule)):
        from xlocal import processes

        processes.start_server()  # a launch follows: its runner starts while the script adds work
        if isinstance(spec, Binary):
            return packaging.package_binary(packageable, spec)
        return packaging.package_python_module(packageable, spec)
    if isinstance(spec, PythonContainer):
        return packaging.package_python_container(packageable, spec, context)
    if isinstance(spec, Dockerfile):
        return packaging.package_dockerfile(packageable, spec, context)
    if isinstance(spec, Container):
        return packaging.package_container(packageable, spec, context)
    return None


@hookimpl
def xcore_launch(executor_kind: str, requests: Sequence[LaunchRequest],
                 context: LaunchContext) -> Sequence[JobHandle | LaunchFailure]:
    from xlocal.executables import LocalContainer

    containers = [i for i, r in enumerate(requests) if isinstance(r.executable, LocalContainer)]
    handles: Sequence[JobHandle | LaunchFailure]
    if not containers:
        from xlocal import processes

        handles = processes.launch(requests, context)
    else:
        handles = _launch_mixed(requests, containers, context)
    _stream_output(requests, handles)
    return handles


def _stream_output(requests: Sequence[Any], handles: Sequence[Any]) -> None:
    """Follow the output of process jobs whose executor asks for it (XManager's option)."""
    from xlocal.handles import ProcessHandle

    wanted = [
        (f"{r.work_unit_id}/{r.job_name}", h) for r, h in zip(requests, handles, strict=True)
        if getattr(r.executor, "experimental_stream_output", False) and isinstance(h, ProcessHandle)
    ]
    if wanted:
        from xlocal import streaming

        streaming.follow(wanted)


def _launch_mixed(requests: Sequence[LaunchRequest], container_indexes: list[int],
                  context: LaunchContext) -> list[JobHandle | LaunchFailure]:
    """Containers first (the likelier to fail as a whole, e.g. engine down), then processes;
    if the processes cannot start, the containers just started are stopped again."""
    from xlocal import containers

    chosen = set(container_indexes)
    others = [i for i in range(len(requests)) if i not in chosen]
    from xlocal.handles import ContainerHandle

    handles: list[Any] = [None] * len(requests)
    started = containers.launch([requests[i] for i in container_indexes], context)
    for index, handle in zip(container_indexes, started, strict=True):
        handles[index] = handle
    if others:
        from xlocal import processes

        try:
            launched = processes.launch([requests[i] for i in others], context)
        except BaseException:
            containers.cancel([h for h in started if isinstance(h, ContainerHandle)])
            raise
        for index, process in zip(others, launched, strict=True):
            handles[index] = process
    return handles


@hookimpl
def xcore_adopt(executor_kind: str, requests: Sequence[LaunchRequest],
                context: LaunchContext) -> Sequence[JobHandle | None] | None:
    from xlocal import processes
    from xlocal.executables import LocalContainer

    if any(isinstance(r.executable, LocalContainer) for r in requests):
        return None  # containers: not adoptable yet (the engine's labels would tell; see README)
    return processes.adopt(requests, context)


@hookimpl
def xcore_job_states(handle_kind: str, handles: Sequence[Any]) -> list[JobState] | None:
    if handle_kind == PROCESS_HANDLE:
        from xlocal import processes

        return processes.states(handles)
    if handle_kind == CONTAINER_HANDLE:
        from xlocal import containers

        return containers.states(handles)
    return None


@hookimpl
def xcore_wait_for_change(handle_kind: str, handles: Sequence[Any], timeout: float) -> bool | None:
    if handle_kind == PROCESS_HANDLE:
        from xlocal import processes

        processes.wait_for_change(handles, timeout)
        return True
    return None


@hookimpl
def xcore_cancel(handle_kind: str, handles: Sequence[Any]) -> bool | None:
    if handle_kind == PROCESS_HANDLE:
        from xlocal import processes

        processes.cancel(handles)
        return True
    if handle_kind == CONTAINER_HANDLE:
        from xlocal import containers

        containers.cancel(handles)
        return True
    return None


@hookimpl
def xcore_job_logs(handle_kind: str, handle: Any, follow: bool) -> Iterator[str] | None:
    if handle_kind == PROCESS_HANDLE:
        from xlocal import processes

        return processes.logs(handle, follow)
    if handle_kind == CONTAINER_HANDLE:
        from xlocal import containers

        return containers.logs(handle, follow)
    return None
