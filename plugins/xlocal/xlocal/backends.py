"""xlocal's two backends: ``Processes`` runs the ``Local`` executor's jobs (processes, and the
containers of a mixed batch) and serves process handles; ``Containers`` serves container
handles. Thin on purpose: the work happens in ``processes`` and ``containers``, imported when
a method needs them (a status poll of processes never imports the Docker code)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from xcore.plugin import Backend, LaunchFailure
from xlocal.executables import LocalContainer, LocalProcess
from xlocal.executors import Local, LocalSpec
from xlocal.handles import ContainerHandle, ProcessHandle

if TYPE_CHECKING:
    from xcore.plugin import (
        Executable,
        JobHandle,
        JobState,
        LaunchContext,
        LaunchRequest,
        Packageable,
        PackagingContext,
        ShellCommand,
    )


class Processes(Backend):
    """The ``Local`` executor: packaging, launch (containers included) and adoption; the state,
    cancel and logs of its process jobs."""

    kinds = (Local, LocalSpec, LocalProcess, LocalContainer, ProcessHandle)
    native_dependencies = True  # the runner starts a job once its dependencies ended (``xlocal.runner``)

    def package(self, packageable: Packageable, context: PackagingContext) -> Executable | None:
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
        if type(spec).__module__.startswith("xhpc."):  # lxm3's specs (xhpc.xm_cluster) on Local
            return packaging.package_lxm3(packageable, spec, context)
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

    def launch(self, requests: Sequence[LaunchRequest],
               context: LaunchContext) -> Sequence[JobHandle | LaunchFailure]:
        containers = [i for i, r in enumerate(requests) if isinstance(r.executable, LocalContainer)]
        if containers:  # a container that asks for GPUs is a runner job (see xlocal.gpu_container)
            from xlocal.containers import asks_for_gpus

            containers = [i for i in containers if not asks_for_gpus(requests[i])]
        waiting = [i for i in containers if requests[i].depends_on]
        if waiting:  # only the runner waits for dependencies, and it runs processes
            why = ("a container job cannot wait for dependencies on xlocal: package it as a process "
                   "(xlocal.Local.Spec()) or drop depends_on")
            failures = {i: LaunchFailure(why) for i in waiting}
            rest = [r for i, r in enumerate(requests) if i not in failures]
            done = iter(self.launch(rest, context) if rest else [])
            return [failures[i] if i in failures else next(done) for i in range(len(requests))]
        handles: Sequence[JobHandle | LaunchFailure]
        if not containers:
            from xlocal import processes

            handles = processes.launch(requests, context)
        else:
            handles = _launch_mixed(requests, containers, context)
        _stream_output(requests, handles)
        return handles

    def adopt(self, requests: Sequence[LaunchRequest], context: LaunchContext) -> Sequence[ProcessHandle | None] | None:
        from xlocal import processes

        if any(isinstance(r.executable, LocalContainer) for r in requests):
            from xlocal.containers import asks_for_gpus

            if not all(asks_for_gpus(r) for r in requests if isinstance(r.executable, LocalContainer)):
                return None  # containers: not adoptable yet (the engine's labels would tell; see README)
        return processes.adopt(requests, context)

    def states(self, handles: Sequence[ProcessHandle]) -> list[JobState]:
        from xlocal import processes

        return processes.states(handles)

    def wait_for_change(self, handles: Sequence[ProcessHandle], timeout: float) -> bool:
        from xlocal import processes

        processes.wait_for_change(handles, timeout)
        return True

    def cancel(self, handles: Sequence[ProcessHandle]) -> None:
        from xlocal import processes

        processes.cancel(handles)

    def logs(self, handle: ProcessHandle, follow: bool) -> Iterator[str]:
        from xlocal import processes

        return processes.logs(handle, follow)

    def shell(self, handle: ProcessHandle, command: list[str] | None) -> ShellCommand:
        from xlocal.shell import process_shell

        return process_shell(handle, command)

    def env(self, handle: ProcessHandle) -> dict[str, str] | None:
        from xlocal import processes

        return processes.job_env(handle)


class Containers(Backend):
    """The state, cancel and logs of container jobs (``Processes.launch`` starts them)."""

    kinds = (ContainerHandle,)

    def states(self, handles: Sequence[ContainerHandle]) -> list[JobState]:
        from xlocal import containers

        return containers.states(handles)

    def cancel(self, handles: Sequence[ContainerHandle]) -> None:
        from xlocal import containers

        containers.cancel(handles)

    def logs(self, handle: ContainerHandle, follow: bool) -> Iterator[str]:
        from xlocal import containers

        return containers.logs(handle, follow)

    def shell(self, handle: ContainerHandle, command: list[str] | None) -> ShellCommand:
        from xlocal.shell import container_shell

        return container_shell(handle, command)


def _stream_output(requests: Sequence[LaunchRequest], handles: Sequence[Any]) -> None:
    """Follow the output of process jobs whose executor asks for it (XManager's option)."""
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
