"""``Distributed``: the variables a multi-process training framework reads, from one option.

A job with ``JobRequirements(replicas=N)`` runs N processes; with
``distributed=xm.Distributed("torch")`` on its executor, each process gets what
``torch.distributed`` (``init_method="env://"``), ``jax.distributed.initialize()`` or
TensorFlow's ``TF_CONFIG`` needs. The core computes nothing backend-specific: each backend
knows the hosts, ranks and a free port, and calls ``distributed_env`` (or, where the variables must
be computed on the cluster from the scheduler's own, sets the names documented here itself).

Every framework also gets the xcore names ``XCORE_RANK``, ``XCORE_WORLD_SIZE``,
``XCORE_LOCAL_RANK`` and ``XCORE_COORDINATOR`` (``host:port``), so a program can read one set
whatever the framework. See docs/gangs.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from xcore.model import datamodel

FRAMEWORKS = ("torch", "jax", "tf")
DEFAULT_PORT = 29500  # torchrun's; a backend that can pick a free port does


def _framework(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if value not in FRAMEWORKS:
        raise ValueError(f"Distributed({value!r}): the framework is one of {', '.join(map(repr, FRAMEWORKS))}.")


def _port(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535):
        raise ValueError(f"Distributed(port={value!r}): give a TCP port from 1 to 65535, or None to let the "
                         "backend choose one.")


@datamodel.frozen
class Distributed:
    """Which framework's variables each process of a replicated job gets.

    - ``framework``: ``"torch"`` (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``,
      ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``), ``"jax"`` (``JAX_COORDINATOR_ADDRESS``, which
      ``jax.distributed.initialize()`` reads itself, plus ``JAX_NUM_PROCESSES`` and
      ``JAX_PROCESS_ID`` to pass as its arguments where JAX does not detect them) or ``"tf"``
      (``TF_CONFIG``: every process is a ``worker``).
    - ``port``: the coordinator's TCP port on the first host; None lets the backend choose
      (a free port on this machine for xlocal, one derived from the job id on a cluster).
    """

    framework: str = attrs.field(validator=_framework)
    port: int | None = attrs.field(default=None, validator=_port, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """The stored form (an executor field)."""
        return {"framework": self.framework, "port": self.port}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Distributed:
        return cls(data["framework"], port=data.get("port"))


def to_distributed(value: Distributed | str | Mapping[str, Any] | None) -> Distributed | None:
    """An executor field's converter: ``"torch"`` means ``Distributed("torch")``."""
    if value is None or isinstance(value, Distributed):
        return value
    if isinstance(value, str):
        return Distributed(value)
    if isinstance(value, Mapping):
        return Distributed.from_dict(value)
    raise TypeError(f"distributed={value!r}: give xm.Distributed('torch' | 'jax' | 'tf') or the framework's name.")


def distributed_env(distributed: Distributed | None, *, rank: int, world_size: int, coordinator: str, port: int,
                local_rank: int = 0, local_world_size: int = 1,
                workers: Sequence[str] = ()) -> dict[str, str]:
    """The variables process ``rank`` of ``world_size`` gets. ``coordinator`` is the first
    process's host, ``port`` its free port; ``workers`` (``host:port`` per rank) is only read
    for ``tf`` (its cluster spec; without it every worker is ``coordinator:port+rank``)."""
    env = {
        "XCORE_RANK": str(rank),
        "XCORE_WORLD_SIZE": str(world_size),
        "XCORE_LOCAL_RANK": str(local_rank),
        "XCORE_COORDINATOR": f"{coordinator}:{port}",
    }
    if distributed is None:  # replicas without a framework: the xcore names only
        return env
    if distributed.framework == "torch":
        env.update(MASTER_ADDR=coordinator, MASTER_PORT=str(port), WORLD_SIZE=str(world_size), RANK=str(rank),
                   LOCAL_RANK=str(local_rank), LOCAL_WORLD_SIZE=str(local_world_size))
    elif distributed.framework == "jax":
        env.update(JAX_COORDINATOR_ADDRESS=f"{coordinator}:{port}", JAX_NUM_PROCESSES=str(world_size),
                   JAX_PROCESS_ID=str(rank))
    else:
        hosts = list(workers) or [f"{coordinator}:{port + i}" for i in range(world_size)]
        env["TF_CONFIG"] = tf_config({"worker": hosts}, "worker", rank)
    return env


def tf_config(cluster: Mapping[str, Sequence[str]], task_type: str, index: int) -> str:
    """TensorFlow's ``TF_CONFIG``: the cluster (role -> ``host:port`` list) and this task."""
    return json.dumps({"cluster": {role: list(hosts) for role, hosts in cluster.items()},
                       "task": {"type": task_type, "index": index}}, separators=(",", ":"))


def role_env(hosts: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """What each job of a JobGroup learns of the others: ``XCORE_JOB_HOSTS`` (JSON, role ->
    hosts, one per replica) and ``XCORE_HOST_<ROLE>`` (the role's first host; the role name in
    upper case, other characters than letters and digits as ``_``)."""
    env = {"XCORE_JOB_HOSTS": json.dumps({role: list(h) for role, h in hosts.items()}, separators=(",", ":"))}
    for role, role_hosts in hosts.items():
        if role_hosts:
            env[role_variable(role)] = role_hosts[0]
    return env


def role_variable(role: str) -> str:
    """``XCORE_HOST_<ROLE>`` for a JobGroup member's name."""
    return "XCORE_HOST_" + "".join(c if c.isascii() and c.isalnum() else "_" for c in role.upper())
