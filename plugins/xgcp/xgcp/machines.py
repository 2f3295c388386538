"""Vertex AI machine types as a table, and the smallest one that fits a job's requirements.

Each row: machine type, vCPUs, memory (GiB), accelerator (xcore resource name) and the
accelerator counts the type allows. Built-in accelerators (a2, a3, g2, TPU) have one count;
n1 machines take attachable GPUs in the counts Google allows, up to a vCPU limit per count.
Sources: Google Cloud's "Configure compute resources for custom training" and the GPU
platform pages (figures as of 2026). Adding a type is one line.

TPUs come as *slices* (``TPU_SLICES``): a topology (``tpu_v5e='4x4'``) or a chip count
(``tpu_v5e=16``, read as the family's shape with that many chips) becomes one worker pool of
the family's host machine type with ``tpu_topology`` set and one replica per host (a 4x4 v5e
slice: 4 hosts of ``ct5lp-hightpu-4t``). A shape Vertex does not run is a clear error, and so
is ``num_slices > 1``: aiplatform_v1 has no field for multi-slice jobs.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from xcore.plugin import JobRequirements
from xcore.plugin import (
    ResourceSpecError as ConfigurationError,  # requirement errors are spec errors
)

GiB = 1024**3


@attrs.frozen
class Machine:
    machine_type: str
    vcpus: int
    memory_gib: float
    accelerator: str | None = None  # xcore ResourceType name: "T4", "A100", "TPU_V5E"...
    accelerator_count: int = 0
    vertex_accelerator: str | None = None  # aiplatform_v1 AcceleratorType name
    tpu_topology: str | None = None
    hosts: int = 1  # replicas a TPU slice needs (one per host VM)


def _family(prefix: str, sizes: Iterable[int], gib_per_vcpu: float) -> list[Machine]:
    return [Machine(f"{prefix}-{n}", n, n * gib_per_vcpu) for n in sizes]


CPU_MACHINES: list[Machine] = [
    *_family("n2-highcpu", (2, 4, 8, 16, 32, 48, 64, 80), 1),
    *_family("n2-standard", (2, 4, 8, 16, 32, 48, 64, 80), 4),
    *_family("n2-highmem", (2, 4, 8, 16, 32, 48, 64, 80), 8),
    *_family("n1-highcpu", (4, 8, 16, 32, 64, 96), 0.9),
    *_family("n1-standard", (4, 8, 16, 32, 64, 96), 3.75),
    *_family("n1-highmem", (2, 4, 8, 16, 32, 64, 96), 6.5),
]

#: GPUs attached to n1 machines: Vertex accelerator name and {count: most vCPUs allowed}.
N1_GPUS: dict[str, tuple[str, dict[int, int]]] = {
    "T4": ("NVIDIA_TESLA_T4", {1: 48, 2: 48, 4: 96}),
    "P4": ("NVIDIA_TESLA_P4", {1: 24, 2: 48, 4: 96}),
    "P100": ("NVIDIA_TESLA_P100", {1: 16, 2: 32, 4: 96}),
    "V100": ("NVIDIA_TESLA_V100", {1: 12, 2: 24, 4: 48, 8: 96}),
}


def _builtin(machine: str, vcpus: int, gib: float, acc: str, count: int, vertex: str | None,
             topology: str | None = None) -> Machine:
    return Machine(machine, vcpus, gib, acc, count, vertex, topology)


ACCELERATOR_MACHINES: list[Machine] = [
    _builtin("a2-highgpu-1g", 12, 85, "A100", 1, "NVIDIA_TESLA_A100"),
    _builtin("a2-highgpu-2g", 24, 170, "A100", 2, "NVIDIA_TESLA_A100"),
    _builtin("a2-highgpu-4g", 48, 340, "A100", 4, "NVIDIA_TESLA_A100"),
    _builtin("a2-highgpu-8g", 96, 680, "A100", 8, "NVIDIA_TESLA_A100"),
    _builtin("a2-megagpu-16g", 96, 1360, "A100", 16, "NVIDIA_TESLA_A100"),
    _builtin("a2-ultragpu-1g", 12, 170, "A100_80GIB", 1, "NVIDIA_A100_80GB"),
    _builtin("a2-ultragpu-2g", 24, 340, "A100_80GIB", 2, "NVIDIA_A100_80GB"),
    _builtin("a2-ultragpu-4g", 48, 680, "A100_80GIB", 4, "NVIDIA_A100_80GB"),
    _builtin("a2-ultragpu-8g", 96, 1360, "A100_80GIB", 8, "NVIDIA_A100_80GB"),
    _builtin("a3-highgpu-8g", 208, 1872, "H100", 8, "NVIDIA_H100_80GB"),
    _builtin("a3-megagpu-8g", 208, 1872, "H100_MEGA", 8, "NVIDIA_H100_MEGA_80GB"),
    _builtin("a3-ultragpu-8g", 224, 2952, "H200", 8, "NVIDIA_H200_141GB"),
    _builtin("a4-highgpu-8g", 224, 3968, "B200", 8, "NVIDIA_B200"),
    _builtin("g2-standard-4", 4, 16, "L4", 1, "NVIDIA_L4"),
    _builtin("g2-standard-8", 8, 32, "L4", 1, "NVIDIA_L4"),
    _builtin("g2-standard-12", 12, 48, "L4", 1, "NVIDIA_L4"),
    _builtin("g2-standard-16", 16, 64, "L4", 1, "NVIDIA_L4"),
    _builtin("g2-standard-32", 32, 128, "L4", 1, "NVIDIA_L4"),
    _builtin("g2-standard-24", 24, 96, "L4", 2, "NVIDIA_L4"),
    _builtin("g2-standard-48", 48, 192, "L4", 4, "NVIDIA_L4"),
    _builtin("g2-standard-96", 96, 384, "L4", 8, "NVIDIA_L4"),
    # TPUs: cores for v2/v3 (one 8-core host), chips for v4 and later.
    _builtin("cloud-tpu", 96, 335, "TPU_V2", 8, "TPU_V2"),
    _builtin("cloud-tpu", 96, 335, "TPU_V3", 8, "TPU_V3"),
    _builtin("ct4p-hightpu-4t", 240, 407, "TPU_V4", 4, "TPU_V4_POD", "2x2x1"),
    _builtin("ct5p-hightpu-4t", 208, 448, "TPU_V5P", 4, None, "2x2x1"),
    _builtin("ct5lp-hightpu-1t", 24, 48, "TPU_V5E", 1, "TPU_V5_LITEPOD", "1x1"),
    _builtin("ct5lp-hightpu-4t", 112, 192, "TPU_V5E", 4, "TPU_V5_LITEPOD", "2x2"),
    _builtin("ct5lp-hightpu-8t", 224, 384, "TPU_V5E", 8, "TPU_V5_LITEPOD", "2x4"),
    _builtin("ct6e-standard-1t", 44, 176, "TPU_V6E", 1, None, "1x1"),
    _builtin("ct6e-standard-4t", 180, 720, "TPU_V6E", 4, None, "2x2"),
    _builtin("ct6e-standard-8t", 180, 1440, "TPU_V6E", 8, None, "2x4"),
]


@attrs.frozen
class TpuFamily:
    """The TPU slices Vertex runs for one xcore TPU type. ``shapes``: topology -> the machine
    type of a single-host slice, or None for a multi-host slice of ``host_machine`` VMs."""

    accelerator: str
    host_machine: str
    chips_per_host: int
    vertex_accelerator: str | None  # None: the machine type alone names the TPU (no enum in v1)
    shapes: dict[str, str | None]


def _shapes(single: dict[str, str], multi: Iterable[str]) -> dict[str, str | None]:
    return {**single, **dict.fromkeys(multi)}


_CUBES = ("2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16", "8x16x16")
_GRIDS = ("4x4", "4x8", "8x8", "8x16", "16x16")

#: TPU v4 and v5p: 3D slices of 4-chip hosts; v5e and v6e: 2D slices, 1/4/8-chip single hosts.
TPU_SLICES: dict[str, TpuFamily] = {f.accelerator: f for f in (
    TpuFamily("TPU_V4", "ct4p-hightpu-4t", 4, "TPU_V4_POD", _shapes({"2x2x1": "ct4p-hightpu-4t"}, _CUBES)),
    TpuFamily("TPU_V5P", "ct5p-hightpu-4t", 4, None, _shapes({"2x2x1": "ct5p-hightpu-4t"}, _CUBES)),
    TpuFamily("TPU_V5E", "ct5lp-hightpu-4t", 4, "TPU_V5_LITEPOD", _shapes(
        {"1x1": "ct5lp-hightpu-1t", "2x2": "ct5lp-hightpu-4t", "2x4": "ct5lp-hightpu-8t"}, _GRIDS)),
    TpuFamily("TPU_V6E", "ct6e-standard-4t", 4, None, _shapes(
        {"1x1": "ct6e-standard-1t", "2x2": "ct6e-standard-4t", "2x4": "ct6e-standard-8t"}, _GRIDS)),
)}

DEFAULT_MACHINE = "n1-standard-4"  # Vertex's own default for a worker pool

KNOWN_MACHINE_TYPES = frozenset(m.machine_type for m in CPU_MACHINES + ACCELERATOR_MACHINES)


def _n1_with_gpus(accelerator: str, count: int) -> list[Machine]:
    vertex, limits = N1_GPUS[accelerator]
    if count not in limits:
        allowed = ", ".join(str(c) for c in limits)
        raise ConfigurationError(
            f"Vertex: n1 machines take {allowed} {accelerator} GPUs, not {count}; ask for one of those counts.")
    return [attrs.evolve(m, accelerator=accelerator, accelerator_count=count, vertex_accelerator=vertex)
            for m in CPU_MACHINES if m.machine_type.startswith("n1-") and m.vcpus <= limits[count]]


def supported_accelerators() -> list[str]:
    return sorted({m.accelerator for m in ACCELERATOR_MACHINES if m.accelerator} | set(N1_GPUS))


def candidates(accelerator: str | None, count: int) -> list[Machine]:
    """Every machine that carries exactly ``count`` of ``accelerator`` (none: CPU machines)."""
    if accelerator is None:
        return list(CPU_MACHINES)
    if accelerator in N1_GPUS:
        return _n1_with_gpus(accelerator, count)
    builtin = [m for m in ACCELERATOR_MACHINES if m.accelerator == accelerator]
    if not builtin:
        raise ConfigurationError(
            f"Vertex has no machine with {accelerator} accelerators; use one of {', '.join(supported_accelerators())}.")
    fitting = [m for m in builtin if m.accelerator_count == count]
    if not fitting:
        allowed = sorted({m.accelerator_count for m in builtin})
        raise ConfigurationError(
            f"Vertex machines carry {' or '.join(map(str, allowed))} {accelerator} accelerators, not {count}; "
            f"ask for one of those counts.")
    return fitting


def _chips(topology: str) -> int:
    count = 1
    for size in topology.split("x"):
        count *= int(size)
    return count


def tpu_slice(requirements: JobRequirements) -> Machine:
    """The machine (one host VM) of the TPU slice the requirements name, with ``tpu_topology``
    and ``hosts`` set; a chip count picks the family's shape with that many chips."""
    accelerator = requirements.accelerator.name
    family = TPU_SLICES[accelerator]
    shape = requirements.topology
    if shape is not None and len(shape.dimensions) > 1:
        topology = shape.name
        if topology not in family.shapes:
            raise ConfigurationError(
                f"Vertex runs {accelerator} slices of {', '.join(family.shapes)}, not {topology}; "
                f"ask for one of those topologies.")
    else:
        count = requirements.accelerator_count
        topology = next((t for t in family.shapes if _chips(t) == count), "")
        if not topology:
            allowed = ", ".join(str(c) for c in sorted({_chips(t) for t in family.shapes}))
            raise ConfigurationError(
                f"Vertex runs {accelerator} slices of {allowed} chips, not {count}; ask for one of those counts "
                f"or a topology such as {accelerator.lower()}={next(iter(family.shapes))!r}.")
    single = family.shapes[topology]
    hosts = 1 if single else _chips(topology) // family.chips_per_host
    machine = next(m for m in ACCELERATOR_MACHINES if m.machine_type == (single or family.host_machine))
    replicas = requirements.replicas
    if replicas not in (1, hosts):
        raise ConfigurationError(
            f"Vertex runs a {topology} {accelerator} slice on {hosts} host(s), one replica each; "
            f"leave replicas unset (or {hosts}), not {replicas}.")
    return attrs.evolve(machine, tpu_topology=topology, hosts=hosts)


def select_machine(requirements: JobRequirements) -> Machine:
    """The smallest machine (fewest vCPUs, then least memory) with the requested accelerators,
    at least the requested vCPUs and memory. No requirements: ``n1-standard-4``. TPUs: the
    host machine of the slice (``tpu_slice``)."""
    cpu, memory = requirements.cpu, requirements.memory
    accelerator = requirements.accelerator.name if requirements.accelerator else None
    if accelerator == "LOCAL_GPU":
        raise ConfigurationError("Vertex: name the GPU type (t4=1, l4=1, a100=1, h100=8...), not a generic gpu.")
    if (requirements.num_slices or 1) > 1:
        raise ConfigurationError(
            f"Vertex custom jobs run one TPU slice (aiplatform_v1 has no multi-slice field), not "
            f"num_slices={requirements.num_slices}: ask for one larger slice, or run Multislice on GKE with xk8s.")
    if accelerator is None and cpu is None and memory is None:
        return next(m for m in CPU_MACHINES if m.machine_type == DEFAULT_MACHINE)
    if accelerator in ("TPU_V2", "TPU_V3") and requirements.topology and len(requirements.topology.dimensions) > 1:
        raise ConfigurationError(
            f"Vertex runs {accelerator} as one 8-core host ({accelerator.lower()}=8), not {requirements.topology.name} "
            f"pod slices; for a multi-host slice use {', '.join(t.lower() for t in TPU_SLICES)}.")
    if accelerator in TPU_SLICES:
        machine = tpu_slice(requirements)
        if (cpu or 0) > machine.vcpus or (memory or 0) > machine.memory_gib * GiB:
            raise ConfigurationError(
                f"Vertex: a {machine.machine_type} TPU host has {machine.vcpus} vCPUs and {machine.memory_gib:g} GiB, "
                f"less than the {cpu or 0:g} vCPUs and {(memory or 0) / GiB:g} GiB asked for; lower cpu or memory.")
        return machine
    count, hosts = requirements.accelerator_count, 1
    shape = requirements.topology
    if accelerator and shape is not None and len(shape.dimensions) > 1:  # GPUs: h100='8x2' = 2 hosts of 8
        count, hosts = shape.dimensions[0], shape.chip_count // shape.dimensions[0]
    pool = candidates(accelerator, count)
    fitting = [m for m in pool if (cpu or 0) <= m.vcpus and (memory or 0) <= m.memory_gib * GiB]
    if not fitting:
        largest = max(pool, key=lambda m: (m.vcpus, m.memory_gib))
        what = f" with {count} {accelerator}" if accelerator else ""
        raise ConfigurationError(
            f"Vertex: no machine{what} has {cpu or 0:g} vCPUs and {(memory or 0) / GiB:g} GiB; the largest "
            f"({largest.machine_type}) has {largest.vcpus} vCPUs and {largest.memory_gib:g} GiB. Lower cpu or memory.")
    return attrs.evolve(min(fitting, key=lambda m: (m.vcpus, m.memory_gib)), hosts=hosts)
