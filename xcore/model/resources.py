"""Resource requests (XManager's ``JobRequirements``), validated when they are written.

Names, enum values, aliases (``RAM`` = ``MEMORY``, ``DISK`` = ``EPHEMERAL_STORAGE``) and
errors follow XManager: ``ResourceType['cpu']`` is case-insensitive and an unknown name is a
``KeyError``. xcore additions: size strings (``'16GiB'``), a hint for misspelled names, and
a few accelerator types XManager lacks. Adding a GPU or TPU type is one line in the tables.
"""

from __future__ import annotations

import enum
import functools
import math
import operator
import re
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from xcore.errors import ResourceSpecError
from xcore.model import quantities as units

# (name, value): XManager's values where XManager has the type, xcore's own from 200001 on.
_BASE_TYPES = (("CPU", 100002), ("MEMORY", 39), ("RAM", 39), ("EPHEMERAL_STORAGE", 100003), ("DISK", 100003))
_GPU_TABLE = (
    ("LOCAL_GPU", 100006), ("P4", 21), ("T4", 22), ("L4", 200001), ("L4_24TH", 68), ("P100", 14), ("V100", 17),
    ("A10", 200002), ("A100", 46), ("A100_80GIB", 66), ("H100", 70), ("H100_MEGA", 200003), ("H200", 86),
    ("B200", 87), ("B300", 112), ("GB200", 89), ("GB300", 100), ("VR200", 200004), ("B40_48TH", 93),
)
_TPU_TABLE = (
    ("TPU_V2", 3), ("TPU_V3", 16), ("TPU_V4", 34), ("TPU_V4_LITE", 200101), ("TPU_V5E", 60), ("TPU_V5P", 59),
    ("TPU_V6E", 63), ("TPU_V7", 200102), ("TPU_V7X", 92),
)
_ARM_ACCELERATORS = frozenset({"GB200", "GB300", "VR200"})
"""Accelerators that come with ARM hosts; every other GPU and TPU comes with x86 (HASWELL)
hosts, as XManager's ``ResourceType.architecture()`` says (LOCAL_GPU: none)."""
_GPU_TYPES = tuple(name for name, _ in _GPU_TABLE)
_TPU_TYPES = tuple(name for name, _ in _TPU_TABLE)


class UnknownResourceError(ResourceSpecError, KeyError):
    """An unknown resource name: a KeyError as in XManager, with a hint at the right name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class _CaseInsensitiveEnumMeta(enum.EnumMeta):
    """``ResourceType['cpu']`` and ``ServiceTier['batch']`` work; unknown names raise KeyError."""

    def __getitem__(cls, name: str) -> Any:
        try:
            return super().__getitem__(name.upper() if isinstance(name, str) else name)
        except KeyError:
            known = [m.lower() for m in cls.__members__]
            import difflib  # only for this message: it costs every launch ~3 ms

            close = difflib.get_close_matches(str(name).lower(), known, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise UnknownResourceError(f"Unknown {cls.__name__} {name!r}.{hint}") from None


class Architecture(enum.Enum):
    """CPU architecture a job should run on."""

    HASWELL = 1
    ARM = 2


class _ResourceTypeBase(enum.Enum, metaclass=_CaseInsensitiveEnumMeta):
    @property
    def is_gpu(self) -> bool:
        return self.name in _GPU_TYPES

    @property
    def is_tpu(self) -> bool:
        return self.name in _TPU_TYPES

    @property
    def is_accelerator(self) -> bool:
        return self.is_gpu or self.is_tpu

    def architecture(self) -> Architecture:
        """The CPU architecture of the hosts this accelerator comes with (XManager's table);
        ValueError for a resource without one (CPU, memory, LOCAL_GPU)."""
        if not self.is_accelerator or self.name == "LOCAL_GPU":
            raise ValueError(f"No Architecture mapped for {self.name}.")
        return Architecture.ARM if self.name in _ARM_ACCELERATORS else Architecture.HASWELL

    def __str__(self) -> str:
        return self.name


# typeshed's Enum.__new__ does not model the functional API on a subclass, and mypy cannot see
# computed members: to mypy the class is Any.
ResourceType: Any = _ResourceTypeBase(  # type: ignore[call-arg]
    "ResourceType", list(_BASE_TYPES + _GPU_TABLE + _TPU_TABLE), module=__name__
)
"""Every resource a job may request; ``RAM`` and ``DISK`` are aliases of ``MEMORY`` and
``EPHEMERAL_STORAGE`` (the same members)."""


class ServiceTier(enum.Enum, metaclass=_CaseInsensitiveEnumMeta):
    """Availability a job asks for: PROD (schedule soon), BATCH (cheaper, may wait or be
    preempted), FREEBIE (cheapest, no guarantee). Backends map it as they can."""

    PROD = 200
    BATCH = 100
    FREEBIE = 25


_DEFAULT_SERVICE_TIER = ServiceTier.PROD


class _SubsetMeta(type):
    _members: frozenset[Any]

    def __contains__(cls, value: object) -> bool:
        return value in cls._members

    def __iter__(cls) -> Iterator[Any]:
        return iter(sorted(cls._members, key=lambda m: m.name))

    def __len__(cls) -> int:
        return len(cls._members)

    def __getitem__(cls, name: str) -> Any:
        member = ResourceType[name]
        if member not in cls._members:
            raise AttributeError(f"type object '{cls.__name__}' has no attribute '{name}'")
        return member

    def contains(cls, value: object) -> bool:
        return value in cls._members


def _subset(name: str, members: list[Any]) -> type:
    """A class whose attributes are ResourceType members (so comparisons work), with ``in``,
    iteration and ``Subset['name']``."""

    def new(cls: type, value: int) -> Any:
        member = ResourceType(value)
        if member not in cls._members:  # type: ignore[attr-defined]
            raise ValueError(f"{value} is not a valid {cls.__name__}")
        return member

    namespace: dict[str, Any] = {m.name: m for m in members}
    namespace.update(_members=frozenset(members), __new__=new, __module__=__name__)
    return _SubsetMeta(name, (), namespace)


TpuType: Any = _subset("TpuType", [ResourceType[n] for n in _TPU_TYPES])
GpuType: Any = _subset("GpuType", [ResourceType[n] for n in _GPU_TYPES if n != "LOCAL_GPU"])
AcceleratorType: Any = _subset("AcceleratorType", [ResourceType[n] for n in _GPU_TYPES + _TPU_TYPES])


class ResourceDict(MutableMapping):
    """Amounts of countable resources keyed by ResourceType; adds and scales."""

    def __init__(self) -> None:
        self._data: dict[Any, float] = {}

    def __setitem__(self, key: Any, value: float) -> None:
        self._data[key] = value

    def __getitem__(self, key: Any) -> float:
        return self._data[key]

    def __delitem__(self, key: Any) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __str__(self) -> str:
        return ", ".join(sorted(f"{key}: {value}" for key, value in self.items()))

    def __repr__(self) -> str:
        return f"ResourceDict({self._data!r})"

    def __add__(self, other: ResourceDict) -> ResourceDict:
        result = ResourceDict()
        for key in [*self.keys(), *other.keys()]:
            result[key] = self.get(key, 0) + other.get(key, 0)
        return result

    def __mul__(self, factor: float) -> ResourceDict:
        result = ResourceDict()
        for key, value in self.items():
            result[key] = value * factor
        return result

    __rmul__ = __mul__


class InvalidTpuTopologyError(Exception):
    """A topology string is not of the form ``N``, ``NxM``, ``NxMxK`` (optionally
    ``_twisted``/``_untwisted``)."""


class Topology:
    """How accelerators are connected: ``'4'`` (4 devices), ``'4x4'`` (a TPU grid)."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not re.fullmatch(r"(\d+x?)+(_(un)?twisted)?", name):
            raise InvalidTpuTopologyError(f"Invalid TPU topology: {name}.")
        self._name = name
        self.dimensions = [int(d) for d in name.split("_")[0].split("x") if d]

    @property
    def chip_count(self) -> int:
        return functools.reduce(operator.mul, self.dimensions)

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"xm.Topology({self._name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topology) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self._name)


ResourceQuantity = int | float | str | Topology

_ALIASES = {"GPU": "LOCAL_GPU"}  # xcore spelling: JobRequirements(gpu=1)
_BYTE_RESOURCES = {"MEMORY", "EPHEMERAL_STORAGE"}
_SIZE_SUFFIXES = {
    "": 1, "b": 1,
    "k": units.KB, "kb": units.KB, "m": units.MB, "mb": units.MB, "g": units.GB, "gb": units.GB,
    "t": units.TB, "tb": units.TB,
    "ki": units.KiB, "kib": units.KiB, "mi": units.MiB, "mib": units.MiB, "gi": units.GiB,
    "gib": units.GiB, "ti": units.TiB, "tib": units.TiB,
}


def parse_resource_type(name: str | enum.Enum) -> Any:
    """The ResourceType for ``name`` (case-insensitive); an unknown name is a KeyError (and a
    ResourceSpecError) that suggests the right one."""
    if isinstance(name, _ResourceTypeBase):
        return name
    if not isinstance(name, str):
        raise TypeError(f"Unsupported resource: {name!r}; use a name such as 'cpu' or an xm.ResourceType.")
    key = name.strip().upper().replace("-", "_")
    key = _ALIASES.get(key, key)
    try:
        return ResourceType[key]
    except UnknownResourceError:
        known = [m.lower() for m in ResourceType.__members__]
        import difflib

        close = difflib.get_close_matches(name.lower(), known, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownResourceError(
            f"Unknown resource {name!r} in JobRequirements.{hint} Known resources: {', '.join(known)}."
        ) from None


def parse_quantity(resource: str, value: Any) -> float:
    """Turn ``8``, ``0.5``, ``'16GiB'`` or ``'2g'`` into a non-negative number."""
    return _parse(resource, value)[0]


def _parse(resource: str, value: Any) -> tuple[float, Topology | None]:
    """A quantity and, for ``'4x4'`` or an ``xm.Topology``, the topology it spells."""
    if isinstance(value, Topology):
        return float(value.chip_count), value
    if isinstance(value, bool):
        raise ResourceSpecError(f"Resource {resource}: expected a number, got {value!r}.")
    if isinstance(value, str) and "x" in value.lower() and not value.strip().lower().startswith("0x"):
        try:
            topology = Topology(value.strip())
        except InvalidTpuTopologyError as error:
            raise ResourceSpecError(
                f"Resource {resource}: cannot read {value!r} as a topology; write e.g. '2x2' or '4x4x4'."
            ) from error
        return float(topology.chip_count), topology
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
    return number, None


def _enum_value(cls: type[enum.Enum], value: Any, what: str) -> Any:
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.upper()]
        except KeyError:
            pass
    raise ResourceSpecError(f"JobRequirements({what}=...) takes an xm.{cls.__name__}, got {value!r}.")


class JobRequirements:
    """What one job needs: ``JobRequirements(cpu=4, memory=8 * xm.GiB, a100=2)``.

    Resources come as a mapping and/or keywords named after ResourceType (case-insensitive);
    accelerators take a count or a topology (``tpu_v3='4x4'``, ``a100='8x2'`` = 2 hosts of 8).
    At most one accelerator type. ``replicas`` may also be given in the mapping.
    """

    def __init__(
        self,
        resources: Mapping[Any, ResourceQuantity] | None = None,
        *,
        architecture: Architecture | None = None,
        location: str | None = None,
        replicas: int | None = None,
        service_tier: ServiceTier | None = None,
        num_slices: int | None = None,
        **kw_resources: ResourceQuantity,
    ) -> None:
        self.location = location
        self._service_tier = _enum_value(ServiceTier, service_tier, "service_tier") or _DEFAULT_SERVICE_TIER
        self.task_requirements = ResourceDict()
        self.accelerator: Any = None
        self.topology: Topology | None = None
        self.num_slices = num_slices
        for key, value in [*(resources or {}).items(), *kw_resources.items()]:
            if isinstance(key, str) and key.lower() == "replicas":
                if replicas is not None:
                    raise ResourceSpecError("replicas has been specified twice.")
                replicas = value  # type: ignore[assignment]  # checked to be an int >= 1 below
                continue
            rtype = parse_resource_type(key)
            scalar, topology = _parse(rtype.name, value)
            if rtype.is_accelerator:
                if self.accelerator is not None:
                    raise ResourceSpecError(
                        f"JobRequirements may request one accelerator type, got {self.accelerator.name}, {rtype.name}."
                    )
                self.accelerator = rtype
                self.topology = topology or Topology(f"{scalar:g}")
            elif topology is not None:
                raise ResourceSpecError(
                    f"A topology ({value!r}) was given for {rtype.name}, which is not an accelerator.")
            if rtype in self.task_requirements:
                raise ResourceSpecError(f"Resource {rtype.name} is requested twice in JobRequirements.")
            self.task_requirements[rtype] = scalar
        if replicas is not None and (
            isinstance(replicas, bool) or not isinstance(replicas, (int, float)) or replicas != int(replicas)
            or replicas < 1
        ):
            raise ResourceSpecError(f"JobRequirements(replicas=...) must be an int >= 1, got {replicas!r}.")
        if (
            self.accelerator in GpuType and self.topology is not None and len(self.topology.dimensions) > 1
            and self.accelerator is not ResourceType.B40_48TH
        ):
            inferred = functools.reduce(operator.mul, self.topology.dimensions[1:])
            if replicas is not None and replicas != inferred:
                raise ResourceSpecError(
                    f"For multihost GPUs with topology {self.topology.name}, replicas must be None or {inferred}, "
                    f"got {replicas}."
                )
            replicas = inferred
        self.replicas = int(replicas) if replicas is not None else 1
        architecture = _enum_value(Architecture, architecture, "architecture")
        if self.accelerator is not None and self.accelerator.name != "LOCAL_GPU":
            required = self.accelerator.architecture()
            if architecture is None:  # as XManager: the accelerator's hosts' architecture
                architecture = required
            elif architecture is not required:
                raise ResourceSpecError(
                    f"Accelerator {self.accelerator.name} requires architecture {required}, but {architecture} "
                    "was specified.")
        self.architecture: Architecture | None = architecture

    @property
    def service_tier(self) -> ServiceTier:
        return self._service_tier

    @service_tier.setter
    def service_tier(self, value: ServiceTier) -> None:
        self._service_tier = _enum_value(ServiceTier, value, "service_tier") or _DEFAULT_SERVICE_TIER

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

    @property
    def extras(self) -> dict[str, Any]:
        """The non-resource settings that differ from their defaults, JSON-ready."""
        extras: dict[str, Any] = {}
        if self.location is not None:
            extras["location"] = self.location
        if self.replicas != 1:
            extras["replicas"] = self.replicas
        if self.service_tier is not _DEFAULT_SERVICE_TIER:
            extras["service_tier"] = self.service_tier.name
        if self.architecture is not None:
            extras["architecture"] = self.architecture.name
        if self.num_slices is not None:
            extras["num_slices"] = self.num_slices
        return extras

    def merge(self, other: JobRequirements) -> JobRequirements:
        """A new JobRequirements: ``other``'s resources override ours (its accelerator replaces
        ours), and its location, architecture, non-default replicas and service tier win."""
        merged: dict[Any, Any] = dict(self.task_requirements)
        if self.accelerator is not None:
            merged[self.accelerator] = self.topology or merged[self.accelerator]
            if other.accelerator is not None:
                del merged[self.accelerator]
        for key, value in other.task_requirements.items():
            merged[key] = other.topology if key is other.accelerator and other.topology else value
        if self.accelerator is not None and other.accelerator is None and self.topology is not None:
            inferred_gpu_replicas = self.accelerator in GpuType and len(self.topology.dimensions) > 1
        else:
            inferred_gpu_replicas = other.accelerator in GpuType and other.topology is not None and len(
                other.topology.dimensions) > 1
        replicas = other.replicas if other.replicas != 1 else self.replicas
        return JobRequirements(
            merged,
            location=other.location if other.location is not None else self.location,
            architecture=other.architecture if other.architecture is not None else self.architecture,
            replicas=None if inferred_gpu_replicas else replicas,
            service_tier=other.service_tier if other.service_tier is not _DEFAULT_SERVICE_TIER else self.service_tier,
            num_slices=other.num_slices if other.num_slices is not None else self.num_slices,
        )

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready form: ``{'resources': {'CPU': 4.0}, 'extras': {...}}``."""
        resources: dict[str, Any] = {r.name: v for r, v in self.task_requirements.items()}
        if self.accelerator is not None and self.topology is not None and len(self.topology.dimensions) > 1:
            resources[self.accelerator.name] = self.topology.name
        return {"resources": resources, "extras": self.extras}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobRequirements:
        return cls(dict(data.get("resources", {})), **dict(data.get("extras", {})))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobRequirements):
            return False
        return (
            dict(self.task_requirements) == dict(other.task_requirements)
            and self.accelerator == other.accelerator
            and self.topology == other.topology
            and self.location == other.location
            and self.service_tier == other.service_tier
            and self.replicas == other.replicas
            and self.architecture == other.architecture
            and self.num_slices == other.num_slices
        )

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        parts = []
        for resource, value in self.task_requirements.items():
            multi_dimensional = self.topology is not None and len(self.topology.dimensions) > 1
            if resource in TpuType or (resource is self.accelerator and multi_dimensional):
                parts.append(f"{resource.name.lower()}={self.topology!r}")
            else:
                parts.append(f"{resource.name.lower()}={value!r}")
        if self.location:
            parts.append(f"location={self.location!r}")
        if self.architecture:
            parts.append(f"architecture=xm.{self.architecture}")
        if self.service_tier is not _DEFAULT_SERVICE_TIER:
            parts.append(f"service_tier=xm.{self.service_tier}")
        if self.replicas != 1:
            parts.append(f"replicas={self.replicas}")
        if self.num_slices is not None:
            parts.append(f"num_slices={self.num_slices}")
        return f"xm.JobRequirements({', '.join(parts)})"


