"""The ``Local`` executor: run on this machine."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from xcore.plugin import Distributed, Executor, ExecutorSpec, JobRequirements, to_distributed, to_requirements


def _requirements(value: JobRequirements | Mapping[str, Any] | None) -> JobRequirements:
    """A named converter (mypy's attrs plugin does not follow the ``to_requirements`` alias)."""
    return to_requirements(value)


@attrs.frozen
class LocalSpec(ExecutorSpec):
    """Package for this machine."""


def _optional_path(value: object) -> object:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _dict_or_empty(value: object) -> dict[object, object]:
    return {} if value is None else dict(value)  # type: ignore[call-overload]


def _volume_paths(volumes: object) -> dict[object, object]:
    return {_optional_path(host): _optional_path(target) for host, target in _dict_or_empty(volumes).items()}


@attrs.frozen
class DockerOptions:
    """How containers run (used when the executable is a container).

    - ``ports``: ``{container_port: host_port}``, published on ``publish_address``
      (default 127.0.0.1, so nothing is exposed beyond this machine).
    - ``volumes``: ``{host_path_or_volume_name: container_path}``; end the container path with
      ``:ro`` for a read-only mount. Relative host paths are taken from the launch directory.
    - ``network``: a network name or mode (``bridge``, ``host``, ``none``, ...); default: the
      engine's default bridge.
    - ``mount_docker_socket``: bind the engine's socket to ``/var/run/docker.sock``.
    - ``init``: run an init process as PID 1 (``docker run --init``) so signals reach the
      program and zombies are reaped.
    - ``shm_size`` (e.g. ``"1g"``), ``user`` (``"1000:1000"``), ``working_dir``: as in
      ``docker run``.
    - ``interactive`` is accepted for XManager compatibility but not supported: containers run
      detached (use ``docker exec -it NAME sh`` on a running job).
    - ``mount_gcs_path`` (XManager's, default True): when ``~/gcs`` exists on this machine it
      is mounted at ``/gcs`` in the container.

    The first four fields are XManager's, in its order: ``DockerOptions(ports, volumes,
    mount_gcs_path, interactive)``.
    """

    ports: dict[int, int] = attrs.field(factory=dict, converter=_dict_or_empty)
    volumes: dict[str, str] = attrs.field(factory=dict, converter=_volume_paths)
    mount_gcs_path: bool = True
    interactive: bool = False
    network: str | None = attrs.field(default=None, kw_only=True)
    mount_docker_socket: bool = attrs.field(default=False, kw_only=True)
    init: bool = attrs.field(default=True, kw_only=True)
    shm_size: str | None = attrs.field(default=None, kw_only=True)
    user: str | None = attrs.field(default=None, kw_only=True)
    working_dir: str | None = attrs.field(default=None, kw_only=True)
    publish_address: str = attrs.field(default="127.0.0.1", kw_only=True)


def _positive_or_none(instance: object, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"Local({attribute.name}=...) must be a whole number >= 1, got {value!r}.")


@attrs.define
class Local(Executor):
    """Run jobs as detached processes (or containers) on this machine.

    ``max_parallel`` caps how many jobs of one launch run at once; all launches on the
    machine together never run more than ``XLOCAL_SLOTS`` jobs (default: CPU count).
    ``inherit_env`` passes the launcher's environment to jobs (as a shell would).

    GPUs (see ``xlocal.gpus`` for how the machine's are found): a job whose requirements ask
    for N GPUs (``a100=2``, ``local_gpu=1``) waits until N devices are free machine-wide and
    gets exactly those (``CUDA_VISIBLE_DEVICES``), holding no CPU slot. ``gpu_share=2`` lets
    up to two such jobs share a device. ``hide_gpus`` (default True): jobs that ask for no
    GPU see none while the machine has some, so they never land on a device a GPU job owns;
    False lets them see what the launcher sees.

    Containers (executables packaged from ``xm.python_container``, ``xm.container`` or
    ``xm.dockerfile_container``) start at once, detached, on the engine named by
    ``DOCKER_HOST``: ``max_parallel``, ``XLOCAL_SLOTS``, ``cwd`` and ``inherit_env`` apply to
    processes only; the requirements' CPU and memory become container limits and GPUs device
    requests; ``docker_options`` sets ports, volumes and network; ``kill_grace_secs`` is the
    stop timeout before SIGKILL.

    As XManager's ``xm_local.Local``, the first three fields may be given by position:
    ``Local(requirements, docker_options, experimental_stream_output)``; the others are
    keyword-only. ``experimental_stream_output=True`` copies each process job's output,
    prefixed with its name, to the launcher's terminal while the launcher runs (default False:
    jobs are detached and logged, see ``xcore logs``).

    ``JobRequirements(replicas=N)`` runs the job as N processes (``xlocal.replicas``);
    ``distributed=xm.Distributed("torch" | "jax" | "tf")`` gives each the variables its
    framework reads, with a free port on 127.0.0.1 (see docs/gangs.md).
    """

    Spec: ClassVar[type[ExecutorSpec]] = LocalSpec
    # Starting early is cheap (one serving runner): a sweep's first committed jobs are handed
    # over at once, later ones every few tens of ms, so jobs run while the script still adds.
    batch_first_max_age: ClassVar[float] = 0.0
    batch_max_age: ClassVar[float] = 0.05
    requirements: JobRequirements = attrs.field(factory=JobRequirements, converter=_requirements)
    docker_options: DockerOptions | None = None
    experimental_stream_output: bool = False
    max_parallel: int | None = attrs.field(default=None, validator=_positive_or_none, kw_only=True)
    cwd: str | None = attrs.field(default=None, converter=_optional_path, kw_only=True)
    inherit_env: bool = attrs.field(default=True, kw_only=True)
    kill_grace_secs: float = attrs.field(default=5.0, kw_only=True)
    gpu_share: int = attrs.field(default=1, validator=_positive_or_none, kw_only=True)
    hide_gpus: bool = attrs.field(default=True, kw_only=True)
    distributed: Distributed | None = attrs.field(default=None, converter=to_distributed, kw_only=True)
