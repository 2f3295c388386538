"""The ``Slurm`` and ``GridEngine`` executors: where a job runs and what it asks for.

Resources come from ``requirements`` (XManager's ``JobRequirements``): CPUs, memory and one
GPU type. Scheduler options are fields; anything else goes in ``directives`` verbatim.
Fields left unset take the cluster's ``[clusters.NAME.defaults]``.
"""

from __future__ import annotations

import datetime
import os
import re
from typing import Any, ClassVar

import attrs

from xcore.job_blocks import Executor, ExecutorSpec


@attrs.frozen
class ClusterSpec(ExecutorSpec):
    """Package for a cluster (an archive unpacked in the cluster's staging directory)."""


@attrs.frozen
class SlurmSpec(ClusterSpec):
    """Package for ``xhpc.Slurm``."""


@attrs.frozen
class GridEngineSpec(ClusterSpec):
    """Package for ``xhpc.GridEngine``."""


def parse_time_limit(value: Any) -> int | None:
    """Seconds from ``3600``, ``timedelta``, ``"90"`` (minutes, as sbatch reads it), ``"1:30:00"``,
    ``"2-00:00:00"`` or ``"30s"``/``"15m"``/``"4h"``/``"2d"``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"time_limit={value!r}: give seconds or a string such as '1:30:00'.")
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        unit = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", text)
        clock = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
        if unit:
            seconds = float(unit.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit.group(2)]
        elif clock:
            days = int(clock.group(1) or 0)
            parts = [int(p) for p in clock.groups()[1:] if p is not None]
            if len(parts) == 1:  # minutes (sbatch's reading of a bare number)
                seconds = parts[0] * 60
            elif len(parts) == 2:  # with days: hours:minutes, else minutes:seconds
                seconds = parts[0] * 3600 + parts[1] * 60 if clock.group(1) else parts[0] * 60 + parts[1]
            else:
                seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
            seconds += days * 86400
        else:
            raise ValueError(f"time_limit={value!r}: write seconds (3600), 'H:MM:SS', 'D-HH:MM:SS' or '4h'.")
    else:
        raise ValueError(f"time_limit={value!r}: give seconds, a timedelta or a string such as '1:30:00'.")
    if seconds <= 0:
        raise ValueError(f"time_limit={value!r} must be positive.")
    return int(-(-seconds // 1))


def _time_limit(value: Any) -> int | None:
    return parse_time_limit(value)


def _str_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _no_newline(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    values = value if isinstance(value, (list, tuple)) else value.values() if isinstance(value, dict) else [value]
    for item in values:
        if isinstance(item, str) and ("\n" in item or "\r" in item or "\0" in item):
            raise ValueError(f"{type(instance).__name__}({attribute.name}=...): {item!r} must be one line.")


def _positive_or_none(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{type(instance).__name__}({attribute.name}=...) must be a whole number >= 1, got {value!r}.")


@attrs.define(kw_only=True)
class ClusterExecutor(Executor):
    """Fields both schedulers share."""

    SCHEDULER: ClassVar[str] = ""

    cluster: str | None = None
    local: bool = False
    job_name: str | None = attrs.field(default=None, validator=_no_newline)
    time_limit: int | None = attrs.field(default=None, converter=_time_limit)
    account: str | None = attrs.field(default=None, validator=_no_newline)
    modules: list[str] = attrs.field(factory=list, converter=_str_list, validator=_no_newline)
    setup: list[str] = attrs.field(factory=list, converter=_str_list)
    directives: list[str] = attrs.field(factory=list, converter=_str_list, validator=_no_newline)
    max_parallel_tasks: int | None = attrs.field(default=None, validator=_positive_or_none)
    workdir: str | None = None
    exclusive: bool = False

    def __attrs_post_init__(self) -> None:
        # Start the SSH handshake now, so it overlaps the launch script adding work units.
        if not self.local and os.environ.get("XHPC_PREWARM", "1") != "0":
            from xhpc import transport

            transport.prewarm(self.cluster, self.SCHEDULER, self.local)

    def group_key(self) -> tuple[Any, ...]:
        """Executors with equal keys can share one array submission."""
        return tuple(
            repr(getattr(self, f.name)) for f in attrs.fields(type(self))
        )


@attrs.define(kw_only=True)
class Slurm(ClusterExecutor):
    """Run on a Slurm cluster. ``gpu_type`` overrides the gres name derived from requirements
    (``JobRequirements(a100=2)`` becomes ``--gres=gpu:a100:2``; ``gpu=2`` becomes ``--gres=gpu:2``)."""

    Spec: ClassVar[type[ExecutorSpec]] = SlurmSpec
    SCHEDULER: ClassVar[str] = "slurm"

    partition: str | None = attrs.field(default=None, validator=_no_newline)
    qos: str | None = attrs.field(default=None, validator=_no_newline)
    constraint: str | None = attrs.field(default=None, validator=_no_newline)
    gpu_type: str | None = attrs.field(default=None, validator=_no_newline)


@attrs.define(kw_only=True)
class GridEngine(ClusterExecutor):
    """Run on a (Son of / Univa / Altair) Grid Engine cluster.

    CPUs use ``parallel_environment`` (``-pe smp 4``); memory becomes ``-l {memory_resource}=``
    per slot; GPUs ``-l {gpu_resource}=N``; ``resources`` adds more ``-l`` requests.
    """

    Spec: ClassVar[type[ExecutorSpec]] = GridEngineSpec
    SCHEDULER: ClassVar[str] = "sge"

    queue: str | None = attrs.field(default=None, validator=_no_newline)
    project: str | None = attrs.field(default=None, validator=_no_newline)
    parallel_environment: str | None = attrs.field(default=None, validator=_no_newline)
    memory_resource: str = "h_vmem"
    gpu_resource: str = "gpu"
    resources: dict[str, str] = attrs.field(factory=dict, validator=_no_newline)
    reserve: bool = False


def with_defaults(executor: ClusterExecutor, defaults: dict[str, Any]) -> ClusterExecutor:
    """The executor with the cluster's defaults filled into fields it leaves unset."""
    if not defaults:
        return executor
    fields = {f.name: f for f in attrs.fields(type(executor))}
    unknown = sorted(set(defaults) - set(fields) - {"cluster", "local"})
    if unknown:
        from xcore.errors import ConfigurationError

        raise ConfigurationError(
            f"Cluster defaults {unknown} are not fields of {type(executor).__name__}; known: "
            f"{sorted(n for n in fields if n not in ('requirements', 'cluster', 'local'))}."
        )
    changes: dict[str, Any] = {}
    for name, value in defaults.items():
        field = fields[name]
        current = getattr(executor, name)
        default = field.default.factory() if isinstance(field.default, attrs.Factory) else field.default  # type: ignore[attr-defined]
        if current == default:
            changes[name] = value
    return attrs.evolve(executor, **changes) if changes else executor
