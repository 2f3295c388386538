"""CPU-, GPU- and TPU-hours a job used, and what they cost by a price table.

Hours are a job's requested resources (its executor's ``JobRequirements``) times how long it
ran (``started_at`` to ``ended_at``, or to now while it runs). Requested, not measured: what a
scheduler reserves is what a lab pays for. A job that asks for no CPUs counts one. Replicas
multiply; an accelerator topology (``a100='8x2'``, ``tpu_v4='4x4'``) already counts every
host's chips, and TPU slices multiply.

Prices come from the ``[cost]`` table of ``config.toml`` (``xcore.settings.config_table``),
per resource-hour, never fetched from anywhere::

    [cost]
    currency = "USD"
    cpu = 0.04            # any job, per CPU-hour
    gpu = 2.50            # per GPU-hour, for GPU types not priced by name
    [cost.vertex-prod]    # jobs on this cluster, target or backend (xhpc, xlocal, ...)
    a100 = 2.93           # an accelerator type by name wins over gpu/tpu
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from xcore.errors import ConfigurationError

_HOUR = 3600.0
_KINDS = ("cpu", "gpu", "tpu")


@attrs.frozen
class Usage:
    """Resource-hours, the accelerator types they were on, and their cost (None: no price
    table, or none that prices these jobs)."""

    cpu_hours: float = 0.0
    gpu_hours: float = 0.0
    tpu_hours: float = 0.0
    cost: float | None = None
    accelerators: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"cpu_hours": round(self.cpu_hours, 6), "gpu_hours": round(self.gpu_hours, 6),
                "tpu_hours": round(self.tpu_hours, 6),
                "cost": None if self.cost is None else round(self.cost, 6)}

    def describe(self, currency: str = "") -> str:
        """``1.0 GPU-h (A100), 2.0 CPU-h, cost 3.10 USD``; ``-`` when nothing ran."""
        parts = []
        if self.gpu_hours:
            parts.append(f"{_hours(self.gpu_hours)} GPU-h")
        if self.tpu_hours:
            parts.append(f"{_hours(self.tpu_hours)} TPU-h")
        if parts and self.accelerators:
            parts[-1] += f" ({', '.join(self.accelerators)})"
        if self.cpu_hours or parts:
            parts.append(f"{_hours(self.cpu_hours)} CPU-h")
        if self.cost is not None and parts:
            parts.append(f"cost {self.cost:.2f}{' ' + currency if currency else ''}")
        return ", ".join(parts) or "-"


def total(usages: Iterable[Usage]) -> Usage:
    cpu = gpu = tpu = cost = 0.0
    priced = False
    accelerators: set[str] = set()
    for usage in usages:
        cpu += usage.cpu_hours
        gpu += usage.gpu_hours
        tpu += usage.tpu_hours
        if usage.cost is not None:
            cost += usage.cost
            priced = True
        accelerators.update(usage.accelerators)
    return Usage(cpu, gpu, tpu, cost if priced else None, tuple(sorted(accelerators)))


def _hours(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


@attrs.frozen
class Request:
    """What a job holds while it runs: CPUs, GPUs, TPU chips, and the accelerator's type."""

    cpus: float = 1.0
    gpus: float = 0.0
    tpus: float = 0.0
    accelerator: str | None = None


def requested(executor: Any) -> Request:
    """What ``executor`` (a stored executor: a dict with ``requirements``) asks for; one CPU
    when it says nothing readable."""
    from xcore.model.resources import JobRequirements, Topology

    data = executor.get("requirements") if isinstance(executor, Mapping) else None
    if not isinstance(data, Mapping):
        return Request()
    try:
        requirements = JobRequirements.from_dict(data)
    except Exception:  # noqa: BLE001 - an old or hand-edited record: count what is sure
        return Request()
    replicas = requirements.replicas
    cpus = (requirements.cpu or 1.0) * replicas
    accelerator = requirements.accelerator
    if accelerator is None:
        return Request(cpus=cpus)
    chips = float(requirements.task_requirements[accelerator])
    topology: Topology | None = requirements.topology
    if topology is None or len(topology.dimensions) <= 1:
        chips *= replicas  # a count is per replica; a topology names every host's chips
    chips *= requirements.num_slices or 1
    if accelerator.is_tpu:
        return Request(cpus=cpus, tpus=chips, accelerator=accelerator.name)
    return Request(cpus=cpus, gpus=chips, accelerator=accelerator.name)


def scope_of(executor_kind: str | None, executor: Any) -> str:
    """The name a price table is chosen by: the executor's ``cluster`` or ``target``, else
    its plugin (``xlocal``, ``xhpc``, ...)."""
    if isinstance(executor, Mapping):
        for field in ("cluster", "target"):
            value = executor.get(field)
            if isinstance(value, str) and value:
                return value
    return (executor_kind or "").partition(".")[0]


def job_usage(job: Mapping[str, Any], now: float, prices: PriceTable | None = None) -> Usage:
    """The usage of one job row (``MetadataStore.unit_rows``' job dicts, or a record's fields)."""
    return Meter(now, prices).job(job)


class Meter:
    """Measures job rows at ``now`` by ``prices``. A sweep's job rows share one executor
    object (the store decodes each distinct spec once), so its request and hourly price are
    worked out once, not per job, and the sums are plain floats: ``show`` at 10,000 jobs."""

    def __init__(self, now: float, prices: PriceTable | None = None) -> None:
        self.now = now
        self.prices = prices
        self._rates: dict[int, tuple[Any, Request, float]] = {}

    def rate(self, executor: Any, executor_kind: str | None) -> tuple[Request, float]:
        """What a job of ``executor`` holds, and what an hour of it costs (0 without prices)."""
        seen = self._rates.get(id(executor))
        if seen is not None and seen[0] is executor:
            return seen[1], seen[2]
        request = requested(executor)
        hourly = 0.0 if self.prices is None else self.prices.hourly(request, scope_of(executor_kind, executor))
        self._rates[id(executor)] = (executor, request, hourly)  # holds it: its id is not reused meanwhile
        return request, hourly

    def job(self, job: Mapping[str, Any]) -> Usage:
        return self.jobs((job,))

    def jobs(self, jobs: Iterable[Mapping[str, Any]]) -> Usage:
        """The summed usage of ``jobs`` (a unit's, an experiment's)."""
        cpu = gpu = tpu = cost = 0.0
        accelerators: set[str] = set()
        now = self.now
        for job in jobs:
            started, ended = job.get("started_at"), job.get("ended_at")
            # every attempt counts: the earlier ones' run time (``earlier_seconds``) and this one's
            hours = (job.get("earlier_seconds") or 0.0) / _HOUR
            if started is not None:
                hours += max(0.0, ((ended if ended is not None else now) - started) / _HOUR)
            if not hours:
                continue
            request, hourly = self.rate(job.get("executor"), job.get("executor_kind"))
            cpu += request.cpus * hours
            gpu += request.gpus * hours
            tpu += request.tpus * hours
            cost += hourly * hours
            if request.accelerator:
                accelerators.add(request.accelerator)
        return Usage(cpu, gpu, tpu, None if self.prices is None or not (cpu or gpu or tpu) else cost,
                     tuple(sorted(accelerators)))


@attrs.frozen
class PriceTable:
    """Prices per resource-hour: ``default`` for any job, ``scopes`` by cluster/target/plugin."""

    currency: str = ""
    default: Mapping[str, float] = attrs.field(factory=dict)
    scopes: Mapping[str, Mapping[str, float]] = attrs.field(factory=dict)

    def hourly(self, request: Request, scope: str) -> float:
        """What an hour of ``request`` costs on ``scope`` (a resource without a price: nothing)."""
        prices = {**self.default, **self.scopes.get(scope, {})}
        total = request.cpus * prices.get("cpu", 0.0)
        for count, kind in ((request.gpus, "gpu"), (request.tpus, "tpu")):
            if count:
                named = prices.get((request.accelerator or "").lower())
                total += count * (named if named is not None else prices.get(kind, 0.0))
        return total


def parse_prices(table: Mapping[str, Any], where: str = "config.toml [cost]") -> PriceTable | None:
    """The price table in ``table`` (``config.toml``'s ``[cost]``); None when it is empty. A bad
    key or price is a ``ConfigurationError`` that names it."""
    if not table:
        return None
    currency = table.get("currency", "")
    if not isinstance(currency, str):
        raise ConfigurationError(f"{where}: currency must be a string such as \"USD\", got {currency!r}.")
    default: dict[str, float] = {}
    scopes: dict[str, dict[str, float]] = {}
    for key, value in table.items():
        if key == "currency":
            continue
        if isinstance(value, Mapping):
            scopes[key] = {k: _price(f"{where[:-1]}.{key}]", k, v) for k, v in value.items()}
        else:
            default[key] = _price(where, key, value)
    return PriceTable(currency, default, scopes)


def _price(where: str, key: str, value: Any) -> float:
    if key.lower() not in _known_resources():
        import difflib

        close = difflib.get_close_matches(key.lower(), sorted(_known_resources()), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigurationError(
            f"{where}: unknown resource {key!r}{hint}; price cpu, gpu, tpu or an accelerator type "
            "such as a100 or tpu_v5e, per hour.")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigurationError(f"{where}: {key} = {value!r} is not a price; write a number >= 0 per {key}-hour.")
    return float(value)


def _known_resources() -> set[str]:
    from xcore.model.resources import ResourceType

    return {*_KINDS, *(r.name.lower() for r in ResourceType if r.is_accelerator)}


def configured_prices() -> PriceTable | None:
    """The price table of ``config.toml``'s ``[cost]``, or None when there is none."""
    from xcore.settings import config_table

    return parse_prices(config_table("cost"))
