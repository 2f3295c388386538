"""The ``Local`` executor: run on this machine."""

from __future__ import annotations

from typing import ClassVar

import attrs

from xcore.job_blocks import Executor, ExecutorSpec


@attrs.frozen
class LocalSpec(ExecutorSpec):
    """Package for this machine."""


@attrs.frozen
class DockerOptions:
    """How containers run: port mappings, volumes (host path -> container path), network,
    and whether to mount the docker socket. Used when the executable is a container."""

    ports: dict[int, int] = attrs.field(factory=dict)
    volumes: dict[str, str] = attrs.field(factory=dict)
    network: str | None = None
    interactive: bool = False
    mount_docker_socket: bool = False


def _positive_or_none(instance: object, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"Local({attribute.name}=...) must be a whole number >= 1, got {value!r}.")


@attrs.define(kw_only=True)
class Local(Executor):
    """Run jobs as detached processes (or containers) on this machine.

    ``max_parallel`` caps how many jobs of one launch run at once; all launches on the
    machine together never run more than ``XLOCAL_SLOTS`` jobs (default: CPU count).
    ``inherit_env`` passes the launcher's environment to jobs (as a shell would).
    """

    Spec: ClassVar[type[ExecutorSpec]] = LocalSpec
    max_parallel: int | None = attrs.field(default=None, validator=_positive_or_none)
    cwd: str | None = None
    inherit_env: bool = True
    docker_options: DockerOptions | None = None
    kill_grace_secs: float = 5.0
