"""xhpc's hook implementations. Thin on purpose: work happens in modules imported inside."""

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


@hookimpl
def xcore_register_kinds(registry: KindRegistrar) -> None:
    from xhpc import executables, executors, handles

    registry.add("xhpc.Slurm", executors.Slurm)
    registry.add("xhpc.GridEngine", executors.GridEngine)
    registry.add("xhpc.SlurmSpec", executors.SlurmSpec)
    registry.add("xhpc.GridEngineSpec", executors.GridEngineSpec)
    registry.add("xhpc.PythonPackage", executables.PythonPackage)
    registry.add("xhpc.UniversalPackage", executables.UniversalPackage)
    registry.add("xhpc.Fileset", executables.Fileset)
    registry.add("xhpc.SingularityContainer", executables.SingularityContainer)
    registry.add("xhpc.Command", executables.Command)
    registry.add("xhpc.ClusterExecutable", executables.ClusterExecutable)
    registry.add("xhpc.SlurmHandle", handles.SlurmHandle)
    registry.add("xhpc.GridEngineHandle", handles.GridEngineHandle)


@hookimpl
def xcore_add_commands(subparsers: Any) -> None:
    from xhpc.cli import add_commands

    add_commands(subparsers)


@hookimpl
def xcore_package(packageable: Packageable, context: PackagingContext) -> Executable | None:
    from xhpc import packaging

    return packaging.package(packageable, context)


@hookimpl
def xcore_launch(executor_kind: str, requests: Sequence[LaunchRequest],
                 context: LaunchContext) -> Sequence[JobHandle | LaunchFailure]:
    from xhpc import launch

    return launch.launch(requests, context)


@hookimpl
def xcore_adopt(executor_kind: str, requests: Sequence[LaunchRequest],
                context: LaunchContext) -> Sequence[JobHandle | None]:
    from xhpc import adoption

    return adoption.adopt(requests)


@hookimpl
def xcore_job_states(handle_kind: str, handles: Sequence[Any]) -> list[JobState]:
    from xhpc import tracking

    return tracking.states(handles)


@hookimpl
def xcore_cancel(handle_kind: str, handles: Sequence[Any]) -> bool:
    from xhpc import tracking

    tracking.cancel(handles)
    return True


@hookimpl
def xcore_job_logs(handle_kind: str, handle: Any, follow: bool) -> Iterator[str]:
    from xhpc import tracking

    return tracking.logs(handle, follow)
