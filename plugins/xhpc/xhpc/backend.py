"""xhpc's backend: Slurm and Grid Engine jobs, on the cluster or over SSH. Thin on purpose: the
work happens in the modules imported inside each method (``packaging``, ``launch``,
``adoption``, ``tracking``), which group a batch by scheduler and cluster themselves."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from xcore.plugin import Backend
from xhpc import executables, executors, handles

if TYPE_CHECKING:
    from xcore.plugin import (
        JobState,
        LaunchContext,
        LaunchFailure,
        LaunchRequest,
        Packageable,
        PackagingContext,
        ShellCommand,
    )
    from xhpc.executables import ClusterExecutable
    from xhpc.handles import ClusterHandle


class Clusters(Backend):
    """The ``Slurm`` and ``GridEngine`` executors and their jobs."""

    kinds = (executors.Slurm, executors.GridEngine, executors.SlurmSpec, executors.GridEngineSpec,
             executables.PythonPackage, executables.UniversalPackage, executables.Fileset,
             executables.SingularityContainer, executables.Command, executables.ClusterExecutable,
             handles.SlurmHandle, handles.GridEngineHandle)

    native_dependencies = True  # Slurm --dependency (afterok, afterany, aftercorr); Grid Engine -hold_jid(_ad)

    def waits_for(self, executor: Any, when: str) -> bool:
        from xhpc.schedulers import SCHEDULERS

        return SCHEDULERS[executor.SCHEDULER].waits_for(when)

    def package(self, packageable: Packageable, context: PackagingContext) -> ClusterExecutable | None:
        from xhpc import packaging

        return packaging.package(packageable, context)

    def launch(self, requests: Sequence[LaunchRequest],
               context: LaunchContext) -> Sequence[ClusterHandle | LaunchFailure]:
        from xhpc import launch

        return launch.launch(requests, context)

    def adopt(self, requests: Sequence[LaunchRequest], context: LaunchContext) -> Sequence[ClusterHandle | None]:
        from xhpc import adoption

        return adoption.adopt(requests)

    def states(self, handles: Sequence[ClusterHandle]) -> list[JobState]:
        from xhpc import tracking

        return tracking.states(handles)

    def cancel(self, handles: Sequence[ClusterHandle]) -> None:
        from xhpc import tracking

        tracking.cancel(handles)

    def logs(self, handle: ClusterHandle, follow: bool) -> Iterator[str]:
        from xhpc import tracking

        return tracking.logs(handle, follow)

    def log_lines(self, handles: Sequence[ClusterHandle], marker: str) -> list[list[str] | None]:
        from xhpc import tracking

        return tracking.log_lines(handles, marker)

    def shell(self, handle: ClusterHandle, command: list[str] | None) -> ShellCommand:
        from xhpc import shell

        return shell.shell(handle, command)

    def env(self, handle: ClusterHandle) -> dict[str, str] | None:
        from xhpc import task_env

        return task_env.env(handle)
