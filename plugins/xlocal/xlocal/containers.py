"""Local containers: create and start them detached on the engine, then ask the engine for
their state, stop them, and stream their logs, from this process or any later one.

Each container is named ``xcore-<experiment>-<work unit>-<job>-<random>`` and labelled
``xcore.experiment``, ``xcore.work_unit``, ``xcore.job`` (the job name), ``xcore.job_id`` and
``xcore.managed-by=xlocal``. Containers are not removed when they end (no ``--rm``), so their
exit code, OOM flag and logs stay readable; clean up with
``docker container prune --filter label=xcore.managed-by=xlocal``.

Containers start as soon as they are launched: the machine-wide slot limit of local processes
(``XLOCAL_SLOTS``) and ``Local(max_parallel=...)`` do not apply to them; use the requirements'
CPU and memory limits to share the machine. A container that asks for GPUs is the exception:
it runs as a runner job (``gpu_job``, see xlocal.gpu_container) so that it waits for its
devices and gets exactly those.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import secrets
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import attrs

from xcore.images import EngineUnavailableError, connect, engine_url, import_docker
from xcore.plugin import (
    JobState,
    LaunchContext,
    LaunchError,
    LaunchFailure,
    LaunchRequest,
    Status,
    cancel_requested,
    decode_chunks,
    exit_state,
    lost_state,
    mark_cancelled,
    private_dir,
)
from xlocal.executables import LocalContainer
from xlocal.executors import DockerOptions, Local
from xlocal.handles import ContainerHandle

MANAGED_BY = "xlocal"
_NAME_PART = re.compile(r"[^a-zA-Z0-9_.-]+")
T = TypeVar("T")
R = TypeVar("R")


def _parallel(function: Callable[[T], R], items: Sequence[T], workers: int = 8) -> list[R]:
    if len(items) <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="xlocal-docker") as pool:
        return list(pool.map(function, items))


# -- launch ---------------------------------------------------------------------------------


@attrs.frozen
class _Planned:
    request: LaunchRequest
    name: str
    create: dict[str, Any]
    handle: ContainerHandle


def container_name(request: LaunchRequest) -> str:
    job = _NAME_PART.sub("-", request.job_name).strip("-.") or "job"
    return f"xcore-{request.experiment_id}-{request.work_unit_id}-{job[:60]}-{secrets.token_hex(3)}"


def labels(request: LaunchRequest) -> dict[str, str]:
    return {
        "xcore.experiment": str(request.experiment_id),
        "xcore.work_unit": str(request.work_unit_id),
        "xcore.job": request.job_name,
        "xcore.job_id": str(request.job_id),
        "xcore.managed-by": MANAGED_BY,
    }


def create_options(client: Any, request: LaunchRequest, name: str) -> dict[str, Any]:
    """The ``create_container`` keyword arguments for one request (no engine call is made)."""
    docker = import_docker()
    executable = request.executable
    if not isinstance(executable, LocalContainer):
        raise LaunchError(f"Local containers cannot run a {type(executable).__name__}.")
    executor: Local = request.executor  # type: ignore[assignment]
    options = executor.docker_options or DockerOptions()
    if options.interactive:
        raise LaunchError(
            "DockerOptions(interactive=True) is not supported: xlocal runs containers detached. "
            "Get a shell in a running job with `docker exec -it CONTAINER sh`."
        )
    requirements = executor.requirements
    host: dict[str, Any] = {"init": options.init or None}
    if requirements.cpu is not None:
        host["nano_cpus"] = max(1, round(requirements.cpu * 1e9))
    if requirements.memory is not None:
        host["mem_limit"] = requirements.memory
        host["memswap_limit"] = requirements.memory  # no swap: over the limit means OOM, not slowness
    if requirements.accelerator is not None:
        if not requirements.accelerator.is_gpu:
            raise LaunchError(f"Local containers cannot use {requirements.accelerator.name}: only GPUs are supported.")
        host["device_requests"] = [  # replaced by the devices the runner chose (gpu_job)
            docker.types.DeviceRequest(count=requirements.accelerator_count, capabilities=[["gpu"]])]
    binds: dict[str, dict[str, str]] = {}
    for source, target in options.volumes.items():
        mode = "rw"
        if target.endswith((":ro", ":rw")):
            target, mode = target[:-3], target[-2:]
        if "/" in source or source.startswith((".", "~")):
            source = os.path.abspath(os.path.expanduser(source))
        binds[source] = {"bind": target, "mode": mode}
    gcs = os.path.expanduser("~/gcs")
    if options.mount_gcs_path and os.path.isdir(gcs) and "/gcs" not in {b["bind"] for b in binds.values()}:
        binds.setdefault(gcs, {"bind": "/gcs", "mode": "rw"})  # XManager's convention
    if options.mount_docker_socket:
        url = engine_url()
        if not url.startswith("unix://"):
            raise LaunchError(f"mount_docker_socket needs a unix socket engine; DOCKER_HOST is {url}.")
        binds[url[len("unix://"):]] = {"bind": "/var/run/docker.sock", "mode": "rw"}
    if binds:
        host["binds"] = binds
    if options.ports:
        host["port_bindings"] = {int(c): (options.publish_address, int(h)) for c, h in options.ports.items()}
    if options.network:
        host["network_mode"] = options.network
    if options.shm_size:
        host["shm_size"] = options.shm_size
    create: dict[str, Any] = {
        "image": executable.image,
        "command": list(request.args) if (request.args or executable.entrypoint is not None) else None,
        "entrypoint": list(executable.entrypoint) if executable.entrypoint is not None else None,
        "environment": [f"{key}={value}" for key, value in request.env.items()],
        "name": name,
        "labels": labels(request),
        "detach": True,
        "host_config": client.api.create_host_config(**host),
    }
    if options.ports:
        create["ports"] = [int(c) for c in options.ports]
    if options.user:
        create["user"] = options.user
    if options.working_dir:
        create["working_dir"] = options.working_dir
    return create


def asks_for_gpus(request: LaunchRequest) -> bool:
    requirements = getattr(request.executor, "requirements", None)
    return isinstance(request.executable, LocalContainer) and requirements is not None and bool(
        requirements.accelerator is not None and requirements.accelerator.is_gpu and requirements.accelerator_count)


def gpu_job(request: LaunchRequest, context: LaunchContext) -> list[str]:
    """The command of a runner job that runs this GPU container on the devices it is given
    (see xlocal.gpu_container); its create options go to a private file it reads."""
    try:
        client = connect()
    except Exception as exc:
        raise LaunchError(str(exc)) from exc
    name = container_name(request)
    spec = {"base_url": engine_url(), "create": create_options(client, request, name),
            "grace": float(getattr(request.executor, "kill_grace_secs", 5.0))}
    path = private_dir(context.state_dir / "containers") / f"{name}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # holds the container's env
    with os.fdopen(fd, "w") as file:
        json.dump(spec, file)
    return [sys.executable, "-m", "xlocal.gpu_container", str(path)]


def launch(requests: Sequence[LaunchRequest], context: LaunchContext) -> list[ContainerHandle | LaunchFailure]:
    """Create and start one container per request, concurrently.

    Raises LaunchError when no container started (engine unreachable, every create failed);
    otherwise a container that failed to start is a ``LaunchFailure`` with the reason.
    """
    try:
        client = connect()
    except Exception as exc:
        raise LaunchError(str(exc)) from exc
    base_url = engine_url()
    markers = private_dir(context.state_dir / "containers")
    planned = []
    for request in requests:
        name = container_name(request)
        grace = float(getattr(request.executor, "kill_grace_secs", 5.0))
        handle = ContainerHandle("", name, base_url, str(markers / f"{name}.cancel"), grace)
        planned.append(_Planned(request, name, create_options(client, request, name), handle))
    context.progress.update("starting 1 container" if len(planned) == 1 else f"starting {len(planned)} containers")
    handles = _parallel(lambda p: _start(client, p), planned)
    failed = [(p.name, h) for p, h in zip(planned, handles, strict=True) if isinstance(h, LaunchFailure)]
    if failed and len(failed) == len(handles):
        raise LaunchError(f"No container could be started: {failed[0][1].reason}")
    for name, failure in failed:
        context.progress.message(f"error: container {name}: {failure.reason}")
    return handles


def _start(client: Any, planned: _Planned) -> ContainerHandle | LaunchFailure:
    docker = import_docker()
    handle = planned.handle
    try:
        created = client.api.create_container(**planned.create)
    except docker.errors.ImageNotFound:
        return LaunchFailure(f"image {planned.create['image']} is not on the engine; package the executable again")
    except docker.errors.APIError as exc:
        return LaunchFailure(f"cannot create the container: {exc.explanation or exc}")
    handle = attrs.evolve(handle, container_id=created["Id"])
    try:
        client.api.start(created["Id"])
    except docker.errors.APIError as exc:
        reason = exc.explanation or str(exc)
        try:
            client.api.remove_container(created["Id"], force=True)
        except docker.errors.APIError:
            pass
        return LaunchFailure(f"cannot start the container: {reason}")
    return handle


# -- status ---------------------------------------------------------------------------------


def _timestamp(value: str | None) -> float | None:
    """Docker's RFC 3339 times (nanoseconds, ``Z``) as UNIX seconds; None for the zero time."""
    if not value or value.startswith("0001-01-01"):
        return None
    match = re.match(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?", value)
    if not match:
        return None
    seconds = calendar.timegm(tuple(int(match[i]) for i in range(1, 7)) + (0, 0, 0))
    fraction = float("0." + match[7]) if match[7] else 0.0
    zone = match[8]
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds + fraction


def state_from_inspect(info: dict[str, Any] | None, cancelled: bool) -> JobState:
    """Map ``docker inspect`` output (None: the container is gone) onto an xcore JobState."""
    if info is None:
        if cancelled:
            return JobState(Status.CANCELLED, "cancelled (container removed)")
        return lost_state("the container no longer exists (removed outside xcore); its exit status is lost")
    state = info.get("State") or {}
    status = state.get("Status", "")
    started = _timestamp(state.get("StartedAt"))
    ended = _timestamp(state.get("FinishedAt"))
    if status == "created":
        if cancelled:
            return JobState(Status.CANCELLED, "cancelled before it started")
        return JobState(Status.PENDING, "created")
    if status in ("running", "paused", "restarting", "removing"):
        message = "cancelling" if cancelled else status
        return JobState(Status.RUNNING, f"{message} ({info.get('Name', '').lstrip('/')})", started_at=started)
    code = state.get("ExitCode")
    if state.get("OOMKilled"):
        return JobState(Status.FAILED, "out of memory", 137 if not code else code, started, ended)
    result = exit_state(code, cancelled=cancelled, started_at=started, ended_at=ended)
    error = (state.get("Error") or "").strip()
    if error and result.status is Status.FAILED:  # the engine's own words (e.g. the entrypoint is missing)
        return JobState(Status.FAILED, error, result.exit_code, started, ended)
    if result.status is Status.FAILED and code in _SHELL_CODES:  # what a shell's 127 and 126 mean
        command = shlex.join([str(info.get("Path") or ""), *map(str, info.get("Args") or [])]).strip()
        what = f"{_SHELL_CODES[code]} (the container ran {command[:300]})" if command else _SHELL_CODES[code]
        return JobState(Status.FAILED, f"{result.message}: {what}", result.exit_code, started, ended)
    return result


_SHELL_CODES = {127: "command not found in the image", 126: "command found but not executable"}


def _inspect(client: Any, handle: ContainerHandle) -> dict[str, Any] | None:
    docker = import_docker()
    try:
        return client.api.inspect_container(handle.container_id or handle.name)
    except docker.errors.NotFound:
        return None


def states(handles: Sequence[ContainerHandle]) -> list[JobState]:
    """One inspect per container (concurrently), grouped by engine."""
    result: dict[int, JobState] = {}
    by_engine: dict[str, list[int]] = {}
    for index, handle in enumerate(handles):
        if handle.error:  # stored by a version that returned failed starts as handles
            cancelled = cancel_requested(handle.cancel_marker)
            result[index] = JobState(Status.CANCELLED if cancelled else Status.FAILED, handle.error)
        else:
            by_engine.setdefault(handle.base_url, []).append(index)
    docker = import_docker()
    for base_url, indexes in by_engine.items():
        client = connect(base_url)

        def inspect(index: int, client: Any = client) -> dict[str, Any] | None:
            return _inspect(client, handles[index])

        try:
            infos = _parallel(inspect, indexes)
        except docker.errors.DockerException as exc:
            raise EngineUnavailableError(
                f"The container engine at {base_url} could not report job states: {exc}") from exc
        for index, info in zip(indexes, infos, strict=True):
            result[index] = state_from_inspect(info, cancel_requested(handles[index].cancel_marker))
    return [result[i] for i in range(len(handles))]


# -- cancel ---------------------------------------------------------------------------------


def cancel(handles: Sequence[ContainerHandle]) -> None:
    """Record the cancel intent, then stop each container (SIGTERM, SIGKILL after its grace)."""
    docker = import_docker()
    for handle in handles:
        mark_cancelled(handle.cancel_marker)
    by_engine: dict[str, list[ContainerHandle]] = {}
    for handle in handles:
        if handle.container_id:
            by_engine.setdefault(handle.base_url, []).append(handle)

    for base_url, group in by_engine.items():
        client = connect(base_url)

        def stop(handle: ContainerHandle, client: Any = client) -> None:
            try:
                client.api.stop(handle.container_id, timeout=max(0, round(handle.stop_grace_secs)))
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError:
                try:
                    client.api.kill(handle.container_id)
                except docker.errors.APIError:
                    pass

        _parallel(stop, group, workers=32)


# -- logs -----------------------------------------------------------------------------------


def logs(handle: ContainerHandle, follow: bool) -> Iterator[str]:
    """The container's stdout and stderr as text, decoded as UTF-8 across chunk boundaries."""
    if handle.error:
        yield f"xcore: {handle.error}\n"
        return
    docker = import_docker()
    client = connect(handle.base_url)
    try:
        stream = client.api.logs(handle.container_id, stdout=True, stderr=True, stream=True, follow=follow)
    except docker.errors.NotFound:
        return
    yield from decode_chunks(stream)


def remove(handles: Sequence[ContainerHandle]) -> None:
    """Remove finished containers (their logs and exit status go with them)."""
    docker = import_docker()
    for handle in handles:
        if not handle.container_id:
            continue
        try:
            connect(handle.base_url).api.remove_container(handle.container_id, force=True)
        except docker.errors.NotFound:
            pass

