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

from xcore.plugin import Distributed, Executor, ExecutorSpec, to_distributed


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


def _signal_before(value: Any) -> int | None:
    if value is None or (value == 0 and not isinstance(value, bool)):
        return value if value is None else 0
    try:
        return parse_time_limit(value)
    except ValueError as exc:
        raise ValueError(str(exc).replace("time_limit=", "signal_before_limit=")) from None


def _str_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


# What each scheduler field may contain. These values are pasted into ``#SBATCH``/``#$`` lines,
# which sbatch and qsub split into options: a space, quote or newline would add options (or, for a
# newline, a shell line to the job script). Names are letters, digits and ``_.-``; lists use ``,``.
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_RULES: dict[str, tuple[str, str]] = {
    "partition": (rf"{_NAME}(,{_NAME})*", "partition names (letters, digits, '_', '.', '-'), comma-separated"),
    "account": (r"[A-Za-z0-9_][A-Za-z0-9_.@-]*", "an account name (letters, digits, '_', '.', '-', '@')"),
    "qos": (rf"{_NAME}(,{_NAME})*", "QOS names (letters, digits, '_', '.', '-'), comma-separated"),
    "constraint": (r"[A-Za-z0-9_.,&|*:!()\[\]][A-Za-z0-9_.,&|*:!()\[\]-]*",
                   "a feature expression without spaces (letters, digits, '_.-' and the operators '&|,*:!()[]')"),
    "gpu_type": (_NAME, "a GRES type name such as 'a100' (letters, digits, '_', '.', '-')"),
    "queue": (r"[A-Za-z0-9_*][A-Za-z0-9_.*@-]*(,[A-Za-z0-9_*][A-Za-z0-9_.*@-]*)*",
              "queue names such as 'all.q' or 'gpu.q@node1' (letters, digits, '_.-*@'), comma-separated"),
    "project": (_NAME, "a project name (letters, digits, '_', '.', '-')"),
    "parallel_environment": (r"[A-Za-z0-9_*][A-Za-z0-9_.*-]*",
                             "a parallel environment name such as 'smp' (letters, digits, '_', '.', '-', '*')"),
    "memory_resource": (r"[A-Za-z_][A-Za-z0-9_.-]*",
                        "a complex name such as 'h_vmem' (letters, digits, '_', '.', '-')"),
    "gpu_resource": (r"[A-Za-z_][A-Za-z0-9_.-]*", "a complex name such as 'gpu' (letters, digits, '_', '.', '-')"),
}
_RESOURCE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_RESOURCE_VALUE = re.compile(r"[A-Za-z0-9_.:*|!@,/+%-]+")


def _describe(instance: Any, name: str, value: Any) -> str:
    return f"{type(instance).__name__}({name}={value!r})"


def _field_text(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """A scheduler field that reaches a directive: refuse anything that could add options or lines."""
    if value is None:
        return
    pattern, allowed = _RULES[attribute.name]
    if not isinstance(value, str):
        raise ValueError(f"{_describe(instance, attribute.name, value)}: must be a string: {allowed}.")
    if not re.fullmatch(pattern, value):
        raise ValueError(f"{_describe(instance, attribute.name, value)}: not allowed; use {allowed}.")


def _job_name(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{_describe(instance, attribute.name, value)}: give a non-empty one-line name "
                         "(other characters than letters, digits and '_.-' become '_').")


def _directive_lines(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    for line in value:
        text = line.strip()
        for prefix in ("#SBATCH", "#$"):
            text = text.removeprefix(prefix).strip()
        if any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in line) or not text.startswith("-"):
            raise ValueError(f"{_describe(instance, attribute.name, value)}: each directive is one line holding "
                             f"scheduler options that start with '-' (e.g. '--mail-type=END' or '-m e'); got {line!r}.")


_MODULE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+/@:,-]*")


def _module_names(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    for name in value:
        if not _MODULE.fullmatch(name):
            raise ValueError(f"{_describe(instance, attribute.name, value)}: {name!r} is not a module name; use "
                             "letters, digits and '_.+/@:,-' without spaces, e.g. 'cuda/12.1' (shell goes in setup=).")


def _resources(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"GridEngine(resources={value!r}): give a dict such as {{'tmpfree': '10G'}}.")
    return {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in value.items()}


def _resource_items(instance: Any, attribute: attrs.Attribute, value: dict[str, str]) -> None:
    for key, item in value.items():
        if not isinstance(key, str) or not _RESOURCE_KEY.fullmatch(key):
            raise ValueError(f"{_describe(instance, attribute.name, value)}: key {key!r} is not a complex name; "
                             "use letters, digits, '_', '.', '-' (e.g. 'h_vmem', 'tmpfree').")
        if not isinstance(item, str) or not _RESOURCE_VALUE.fullmatch(item):
            raise ValueError(f"{_describe(instance, attribute.name, value)}: value {item!r} of {key!r} is not "
                             "allowed; use letters, digits and '_.:*|!@,/+%-' without spaces "
                             "(e.g. '10G', 'node1|node2').")


def _positive_or_none(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{type(instance).__name__}({attribute.name}=...) must be a whole number >= 1, got {value!r}.")


@attrs.define(kw_only=True)
class ClusterExecutor(Executor):
    """Fields both schedulers share."""

    SCHEDULER: ClassVar[str] = ""

    cluster: str | None = None
    local: bool = False
    job_name: str | None = attrs.field(default=None, validator=_job_name)
    time_limit: int | None = attrs.field(default=None, converter=_time_limit)
    account: str | None = attrs.field(default=None, validator=_field_text)
    modules: list[str] = attrs.field(factory=list, converter=_str_list, validator=_module_names)
    setup: list[str] = attrs.field(factory=list, converter=_str_list)
    directives: list[str] = attrs.field(factory=list, converter=_str_list, validator=_directive_lines)
    max_parallel_tasks: int | None = attrs.field(default=None, validator=_positive_or_none)
    workdir: str | None = None
    exclusive: bool = False
    distributed: Distributed | None = attrs.field(default=None, converter=to_distributed)
    signal_before_limit: int | None = attrs.field(default=None, converter=_signal_before)
    """Seconds before ``time_limit`` the job gets SIGUSR1 to save a checkpoint (``"5m"`` works too).
    None: 300 s (at most half the limit) when the retry policy retries ``timeout``, else no
    signal; 0: never. See ``xhpc.retries`` and docs/long-runs.md."""

    def __attrs_post_init__(self) -> None:
        if self.time_limit and self.signal_before_limit and self.signal_before_limit >= self.time_limit:
            raise ValueError(f"{type(self).__name__}(signal_before_limit={self.signal_before_limit}) must be shorter "
                             f"than time_limit={self.time_limit} s (seconds before the limit the warning comes).")
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
    (``JobRequirements(a100=2)`` becomes ``--gres=gpu:a100:2``; ``gpu=2`` becomes ``--gres=gpu:2``).

    ``JobRequirements(replicas=N)`` runs N tasks (``srun``), each with its framework's variables
    when ``distributed=xm.Distributed(...)`` is set; the jobs of a JobGroup start together as one
    allocation (a gang) and learn each other's hosts. See docs/gangs.md.
    """

    Spec: ClassVar[type[ExecutorSpec]] = SlurmSpec
    SCHEDULER: ClassVar[str] = "slurm"

    partition: str | None = attrs.field(default=None, validator=_field_text)
    qos: str | None = attrs.field(default=None, validator=_field_text)
    constraint: str | None = attrs.field(default=None, validator=_field_text)
    gpu_type: str | None = attrs.field(default=None, validator=_field_text)


@attrs.define(kw_only=True)
class GridEngine(ClusterExecutor):
    """Run on a (Son of / Univa / Altair) Grid Engine cluster.

    CPUs use ``parallel_environment`` (``-pe smp 4``); memory becomes ``-l {memory_resource}=``
    per slot; GPUs ``-l {gpu_resource}=N``; ``resources`` adds more ``-l`` requests.
    """

    Spec: ClassVar[type[ExecutorSpec]] = GridEngineSpec
    SCHEDULER: ClassVar[str] = "sge"

    queue: str | None = attrs.field(default=None, validator=_field_text)
    project: str | None = attrs.field(default=None, validator=_field_text)
    parallel_environment: str | None = attrs.field(default=None, validator=_field_text)
    memory_resource: str = attrs.field(default="h_vmem", validator=_field_text)
    gpu_resource: str = attrs.field(default="gpu", validator=_field_text)
    resources: dict[str, str] = attrs.field(factory=dict, converter=_resources, validator=_resource_items)
    reserve: bool = False


def with_defaults(executor: ClusterExecutor, defaults: dict[str, Any]) -> ClusterExecutor:
    """The executor with the cluster's defaults filled into fields it leaves unset."""
    if not defaults:
        return executor
    fields = {f.name: f for f in attrs.fields(type(executor))}
    unknown = sorted(set(defaults) - set(fields) - {"cluster", "local"})
    if unknown:
        from xcore.plugin import ConfigurationError

        raise ConfigurationError(
            f"Cluster defaults {unknown} are not fields of {type(executor).__name__}; known: "
            f"{sorted(n for n in fields if n not in ('requirements', 'cluster', 'local'))}."
        )
    changes: dict[str, Any] = {}
    for name, value in defaults.items():
        field = fields[name]
        current = getattr(executor, name)
        default = field.default.factory() if isinstance(field.default, attrs.Factory) else field.default  # type: ignore[arg-type]
        if current == default:
            changes[name] = value
    if not changes:
        return executor
    try:
        return attrs.evolve(executor, **changes)
    except (ValueError, TypeError) as exc:
        from xcore.plugin import ConfigurationError

        raise ConfigurationError(
            f"A value in the cluster's [defaults] table (clusters.toml) is invalid: {exc}") from None
