"""This machine's GPUs, as the launcher sees them, and which of them a job may get.

The inventory comes from the first of these that answers:

1. ``XLOCAL_GPUS=0,1,2,3`` (indexes or UUIDs; empty or ``none``: no GPUs). Such an inventory
   has no names, so any GPU type a job asks for matches it;
2. the launcher's own ``CUDA_VISIBLE_DEVICES`` (or ``HIP_VISIBLE_DEVICES``): those devices only
   (named when NVML or ``nvidia-smi`` knows them); empty or ``-1``: no GPUs;
3. NVML (``nvidia-ml-py``, imported only here, only if installed);
4. ``nvidia-smi --query-gpu=index,uuid,name,memory.total``;
5. ``rocm-smi`` (AMD).

Devices are locked by ``key``: the index when one is known (NVML and ``nvidia-smi`` count in
PCI bus order, the same for every user), else the id as given. Jobs are given ``id``: the
UUID when one is known (CUDA's own index order need not be the PCI order), else the index.
Only the launcher uses this module: the runner gets the devices' keys and ids in batch.json.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from typing import Any, NamedTuple

from xcore.plugin import JobRequirements, LaunchError, ResourceType

NVIDIA_ENV, AMD_ENV = "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"
_QUERY_SECS = 10.0


class Gpu(NamedTuple):  # not attrs, nor shutil below: a launch without GPUs should not pay for them
    """One device: ``key`` names its lock, ``id`` is what the job's ``env`` variable lists."""

    key: str
    id: str
    name: str | None = None
    memory_mib: int | None = None


class Inventory(NamedTuple):
    """The devices jobs may get, the variable that tells a job its devices, and where they came from."""

    gpus: tuple[Gpu, ...] = ()
    env: str = NVIDIA_ENV
    source: str = "none found"

    def describe(self) -> str:
        if not self.gpus:
            return f"no GPUs ({self.source})"
        names = sorted({g.name for g in self.gpus if g.name})
        kinds = f" ({', '.join(names)})" if names else ""
        return f"{len(self.gpus)} GPU{'s' * (len(self.gpus) != 1)}{kinds} from {self.source}"


_cache: dict[tuple[str | None, ...], Inventory] = {}


def inventory() -> Inventory:
    """The machine's inventory (see the module docstring); asked once per process and settings."""
    settings = (os.environ.get("XLOCAL_GPUS"), os.environ.get(NVIDIA_ENV), os.environ.get(AMD_ENV))
    if settings not in _cache:
        _cache[settings] = _find(*settings)
    return _cache[settings]


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _find(forced: str | None, cuda: str | None, hip: str | None) -> Inventory:
    if forced is not None:
        ids = [] if forced.strip().lower() in ("", "none") else _split(forced)
        return Inventory(tuple(Gpu(_key(i), i) for i in ids), NVIDIA_ENV, "XLOCAL_GPUS")
    for variable, value, vendor in ((NVIDIA_ENV, cuda, "nvidia"), (AMD_ENV, hip, "amd")):
        if value is None:
            continue
        ids = _split(value)
        if "-1" in ids:
            ids = ids[:ids.index("-1")]  # CUDA stops at the first invalid entry: "-1" hides the rest
        known = _query(vendor)
        return Inventory(tuple(_resolve(i, known) for i in ids), variable, f"the launcher's {variable}")
    for vendor, source, variable in (("nvidia", "NVML/nvidia-smi", NVIDIA_ENV), ("amd", "rocm-smi", AMD_ENV)):
        found = _query(vendor)
        if found:
            return Inventory(tuple(found), variable, source)
    return Inventory(source="no NVML, nvidia-smi or rocm-smi answered; set XLOCAL_GPUS=0,1,... to name them")


def _key(device_id: str) -> str:
    """A lock file's name part for a device (UUIDs and MIG ids have characters a name should not)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", device_id)


def _resolve(device_id: str, known: Sequence[Gpu]) -> Gpu:
    """A device the launcher's environment lists, matched to a queried one by index or UUID (prefix)."""
    for gpu in known:
        if device_id == gpu.key or (len(device_id) > 4 and gpu.id.startswith(device_id)):
            return gpu
    return Gpu(_key(device_id), device_id)


def _query(vendor: str) -> list[Gpu]:
    return _nvidia() if vendor == "nvidia" else _amd()


def _nvidia() -> list[Gpu]:
    import importlib

    try:
        pynvml: Any = importlib.import_module("pynvml")  # nvidia-ml-py: optional, and slow to import
    except ImportError:
        return _nvidia_smi()
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []  # a library but no driver: nvidia-smi would not answer either
    try:
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            device = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(device)
            uuid = pynvml.nvmlDeviceGetUUID(device)
            memory = pynvml.nvmlDeviceGetMemoryInfo(device).total // (1 << 20)
            found.append(Gpu(str(index), _text(uuid), _text(name), int(memory)))
        return found
    except pynvml.NVMLError:
        return _nvidia_smi()
    finally:
        pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _nvidia_smi() -> list[Gpu]:
    output = _run(["nvidia-smi", "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"])
    found = []
    for line in output.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 4 and fields[0].isdigit():
            found.append(Gpu(fields[0], fields[1], fields[2], int(fields[3]) if fields[3].isdigit() else None))
    return found


def _amd() -> list[Gpu]:
    import json

    output = _run(["rocm-smi", "--showproductname", "--showuniqueid", "--json"])
    try:
        cards: dict[str, dict[str, Any]] = json.loads(output) if output else {}
    except ValueError:
        return []
    found = []
    for card, fields in cards.items():
        index = card.removeprefix("card")
        if index.isdigit() and isinstance(fields, dict):
            name = fields.get("Card Series") or fields.get("Card series") or fields.get("Card model")
            found.append(Gpu(index, index, str(name) if name else None))
    return found


def _on_path(program: str) -> bool:
    return any(os.access(os.path.join(d, program), os.X_OK) for d in os.get_exec_path())


def _run(argv: list[str]) -> str:
    if not _on_path(argv[0]):
        return ""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_QUERY_SECS, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


# -- what a job asks for ---------------------------------------------------------------------


def requested(requirements: JobRequirements) -> tuple[int, Any]:
    """``(count, GPU type)`` a job asks for; ``(0, None)`` if no GPU. TPUs cannot run here."""
    accelerator = requirements.accelerator
    if accelerator is None:
        return 0, None
    if not accelerator.is_gpu:
        raise LaunchError(f"Local jobs cannot use {accelerator.name}: only GPUs are supported on this machine.")
    return requirements.accelerator_count, accelerator


def matches(gpu: Gpu, gpu_type: Any) -> bool:
    """Is ``gpu`` of the type asked for? A device without a name, and LOCAL_GPU, match any."""
    if gpu.name is None or gpu_type is ResourceType.LOCAL_GPU:
        return True
    base, _, variant = gpu_type.name.partition("_")
    name = gpu.name.upper()
    # A100 must not match A1000, nor B200 match GB200: the model stands alone in the name.
    if not re.search(rf"(?<![A-Z0-9]){re.escape(base)}(?![0-9])", name):
        return False
    if variant.endswith("GIB") and variant[:-3].isdigit() and gpu.memory_mib is not None:
        return gpu.memory_mib >= int(variant[:-3]) * 1024 * 0.9  # the card's usable total is a bit under
    return True


def eligible(found: Inventory, count: int, gpu_type: Any, job: str) -> list[Gpu]:
    """The devices a job asking for ``count`` GPUs of ``gpu_type`` may get; a LaunchError that
    says why if the machine cannot ever give it that many."""
    if not found.gpus:
        raise LaunchError(
            f"{job} asks for {count} GPU{'s' * (count != 1)}, but xlocal found {found.describe()}. "
            "Set XLOCAL_GPUS=0,1,... to the devices jobs may use.")
    fitting = [g for g in found.gpus if matches(g, gpu_type)]
    if not fitting:
        raise LaunchError(f"{job} asks for {gpu_type.name} GPUs; this machine has {found.describe()}.")
    if len(fitting) < count:
        kind = "" if gpu_type is ResourceType.LOCAL_GPU else f" {gpu_type.name}"
        raise LaunchError(f"{job} asks for {count}{kind} GPUs; this machine has {len(fitting)} "
                          f"({found.describe()}).")
    return fitting
