"""Resource requests (XManager's ``JobRequirements``), validated when they are written.

Accelerators are a data table, not code: adding a new GPU or TPU type is one line in
``_GPU_TYPES`` or ``_TPU_TYPES``.
"""

from __future__ import annotations

import difflib
import enum
import math
import re
from collections.abc import Mapping
from typing import Any

from xcore import units
from xcore.errors import ResourceSpecError

_GPU_TYPES = (
    "LOCAL_GPU", "P4", "T4", "L4", "L4_24TH", "P100", "V100", "A10", "A100", "A100_80GIB",
    "H100", "H100_MEGA", "H200", "B200", "B300", "GB200", "GB300", "VR200", "B40_48TH",
)
_TPU_TYPES = (
    "TPU_V2", "TPU_V3", "TPU_V4", "TPU_V4_LITE", "TPU_V5E", "TPU_V5P", "TPU_V6E", "TPU_V7", "TPU_V7X",
)


class _ResourceTypeBase(enum.Enum):
    @property
    def is_gpu(self) -> bool:
        return self.name in _GPU_TYPES

    @property
    def is_tpu(self) -> bool:
        return self.name in _TPU_TYPES

    @property
    def is_accelerator(self) -> bool:
        return self.is_gpu or self.is_tpu

    def __str__(self) -> str:
        return self.name


# typeshed's Enum.__new__ does not model the functional API on a subclass, and mypy cannot see
# computed members: to mypy the class is Any.
ResourceType: Any = _ResourceTypeBase(  # type: ignore[call-arg]
    "ResourceType",
    [(n, n) for n in ("CPU", "MEMORY", "RAM", "EPHEMERAL_STORAGE", "DISK")]
    + [(n, n) for n in _GPU_TYPES + _TPU_TYPES],
)
"""Every resource a job may request. ``RAM`` is an alias spelling of ``MEMORY``."""

_ALIASES = {"RAM": "MEMORY", "DISK": "EPHEMERAL_STORAGE", "GPU": "LOCAL_GPU"}
_BYTE_RESOURCES = {"MEMORY", "EPHEMERAL_STORAGE"}
_SIZE_SUFFIXES = {
    "": 1, "b": 1,
    "k": units.KB, "kb": units.KB, "m": units.MB, "mb": units.MB, "g": units.GB, "gb": units.GB,
    "t": units.TB, "tb": units.TB,
    "ki": units.KiB, "kib": units.KiB, "mi": units.MiB, "mib": units.MiB, "gi": units.GiB,
    "gib": units.GiB, "ti": units.TiB, "tib": units.TiB,
}


def parse_resource_type(name: str | enum.Enum) -> Any:
    """Return the ResourceType for ``name`` (case-insensitive), or raise a helpful error."""
    if isinstance(name, _ResourceTypeBase):
        return ResourceType[_ALIASES.get(name.name, name.name)]
    key = str(name).strip().upper().replace("-", "_")
    key = _ALIASES.get(key, key)
    try:
        return ResourceType[key]
    except KeyError:
        known = [m.name.lower() for m in ResourceType]
        close = difflib.get_close_matches(str(name).lower(), known, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ResourceSpecError(
            f"Unknown resource {name!r} in JobRequirements.{hint} Known resources: "
            f"{', '.join(known)}."
        ) from None


def parse_quantity(resource: str, value: Any) -> float:
    """Turn ``8``, ``0.5``, ``'16GiB'`` or ``'2g'`` into a non-negative number."""
    if isinstance(value, bool):
        raise ResourceSpecError(f"Resource {resource}: expected a number, got {value!r}.")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", value)
        suffix = match.group(2).lower() if match else None
        if not match or suffix not in _SIZE_SUFFIXES or (suffix and resource not in _BYTE_RESOURCES):
            raise ResourceSpecError(
                f"Resource {resource}: cannot read {value!r}. Write a number"
                + (", or a size such as '16GiB', '512MiB', '2GB'." if resource in _BYTE_RESOURCES else ".")
            )
        number = float(match.group(1)) * _SIZE_SUFFIXES[suffix]
    else:
        raise ResourceSpecError(f"Resource {resource}: expected a number, got {type(value).__name__}.")
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise ResourceSpecError(f"Resource {resource}: {value!r} must be a finite number >= 0.")
    if resource not in _BYTE_RESOURCES and resource != "CPU" and number != int(number):
        raise ResourceSpecError(f"Resource {resource}: accelerators come in whole units, got {value!r}.")
    return number


class JobRequirements:
    """What one job needs: ``JobRequirements(cpu=4, memory=8 * xm.GiB, a100=2)``.

    Accepts a ``resources`` mapping and/or keyword arguments named after ResourceType
    (case-insensitive). At most one accelerator type may be requested. Other keywords
    (``location``, ``replicas``, ``service_tier``, ...) are kept in ``extras`` for backends.
    """

    _EXTRA_KEYS = frozenset({"location", "replicas", "service_tier", "architecture", "topology", "num_slices"})

    def __init__(self, resources: Mapping[Any, Any] | None = None, **kwargs: Any) -> None:
        self.task_requirements: dict[Any, float] = {}
        self.extras: dict[str, Any] = {}
        merged: list[tuple[Any, Any]] = list((resources or {}).items())
        for key, value in kwargs.items():
            if key in self._EXTRA_KEYS:
                self.extras[key] = value
            else:
                merged.append((key, value))
        for key, value in merged:
            rtype = parse_resource_type(key)
            if rtype in self.task_requirements:
                raise ResourceSpecError(f"Resource {rtype.name} is requested twice in JobRequirements.")
            self.task_requirements[rtype] = parse_quantity(rtype.name, value)
        accelerators = [r for r in self.task_requirements if r.is_accelerator]
        if len(accelerators) > 1:
            raise ResourceSpecError(
                "JobRequirements may request one accelerator type, got "
                + ", ".join(a.name for a in accelerators) + "."
            )
        self.accelerator = accelerators[0] if accelerators else None
        replicas = self.extras.get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            raise ResourceSpecError(f"JobRequirements(replicas=...) must be an int >= 1, got {replicas!r}.")
        self.replicas = replicas
        self.location: str | None = self.extras.get("location")

    @property
    def cpu(self) -> float | None:
        return self.task_requirements.get(ResourceType.CPU)

    @property
    def memory(self) -> int | None:
        value = self.task_requirements.get(ResourceType.MEMORY)
        return None if value is None else int(value)

    @property
    def accelerator_count(self) -> int:
        return int(self.task_requirements[self.accelerator]) if self.accelerator else 0

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready form: ``{'resources': {'CPU': 4.0}, 'extras': {...}}``."""
        return {
            "resources": {r.name: v for r, v in self.task_requirements.items()},
            "extras": dict(self.extras),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobRequirements:
        return cls(dict(data.get("resources", {})), **dict(data.get("extras", {})))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobRequirements) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        parts = [f"{r.name.lower()}={v:g}" for r, v in self.task_requirements.items()]
        parts += [f"{k}={v!r}" for k, v in self.extras.items()]
        return f"JobRequirements({', '.join(parts)})"
