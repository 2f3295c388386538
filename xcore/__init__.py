"""xcore: launch and track machine-learning experiments on any compute backend.

The launch API keeps XManager's names, so ``from xmanager import xm`` becomes
``import xcore as xm``. Names load on first use, so ``import xcore`` stays fast.
"""

from __future__ import annotations

from xcore.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # launch API
    "create_experiment": "xcore.launch.registry",
    "get_experiment": "xcore.launch.registry",
    "list_experiments": "xcore.launch.registry",
    "Experiment": "xcore.launch.experiment",
    "ExperimentUnit": "xcore.launch.units",
    "WorkUnit": "xcore.launch.units",
    "AuxiliaryUnit": "xcore.launch.units",
    "AuxiliaryUnitJob": "xcore.launch.units",
    "AuxiliaryUnitRole": "xcore.launch.units",
    "WorkUnitRole": "xcore.launch.units",
    "ExperimentUnitRole": "xcore.launch.units",
    "Importance": "xcore.launch.units",
    "MetadataContext": "xcore.launch.units",
    "ContextAnnotations": "xcore.launch.units",
    "WorkUnitCompletedAwaitable": "xcore.launch.units",
    "LaunchFuture": "xcore.launch.units",
    "LaunchedJob": "xcore.launch.core",
    "core": "xcore.launch.core",
    "job_operators": "xcore.launch.job_operators",
    "ShellSafeArg": "xcore.launch.utils",
    "run_in_asyncio_loop": "xcore.launch.utils",
    # job blocks
    "ExecutableSpec": "xcore.launch.job_blocks",
    "Executable": "xcore.launch.job_blocks",
    "ExecutorSpec": "xcore.launch.job_blocks",
    "Executor": "xcore.launch.job_blocks",
    "Packageable": "xcore.launch.job_blocks",
    "Job": "xcore.launch.job_blocks",
    "JobGroup": "xcore.launch.job_blocks",
    "JobConfig": "xcore.launch.job_blocks",
    "JobGeneratorType": "xcore.launch.job_blocks",
    "JobType": "xcore.launch.job_blocks",
    "Constraint": "xcore.launch.job_blocks",
    "get_args_for_all_jobs": "xcore.launch.job_blocks",
    "SequentialArgs": "xcore.launch.args",
    "UserArgs": "xcore.launch.args",
    "merge_args": "xcore.launch.args",
    # executable specs and helpers
    "Binary": "xcore.launch.executables",
    "BinaryDependency": "xcore.launch.executables",
    "PythonModule": "xcore.launch.executables",
    "Container": "xcore.launch.executables",
    "PythonContainer": "xcore.launch.executables",
    "Dockerfile": "xcore.launch.executables",
    "ModuleName": "xcore.launch.executables",
    "CommandList": "xcore.launch.executables",
    "BazelBinary": "xcore.launch.bazel",
    "BazelContainer": "xcore.launch.bazel",
    "bazel_binary": "xcore.launch.bazel",
    "bazel_container": "xcore.launch.bazel",
    "binary": "xcore.launch.packagables",
    "python_module": "xcore.launch.packagables",
    "container": "xcore.launch.packagables",
    "python_container": "xcore.launch.packagables",
    "dockerfile_container": "xcore.launch.packagables",
    # resources and units
    "JobRequirements": "xcore.launch.resources",
    "ResourceType": "xcore.launch.resources",
    "AcceleratorType": "xcore.launch.resources",
    "GpuType": "xcore.launch.resources",
    "TpuType": "xcore.launch.resources",
    "Topology": "xcore.launch.resources",
    "InvalidTpuTopologyError": "xcore.launch.resources",
    "Architecture": "xcore.launch.resources",
    "ServiceTier": "xcore.launch.resources",
    "ResourceDict": "xcore.launch.resources",
    "ResourceQuantity": "xcore.launch.resources",
    **dict.fromkeys(
        ["vCPU", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "PiB", "Sec", "Min", "Hr"],
        "xcore.launch.quantities"),
    # status
    "Status": "xcore.status",
    "JobState": "xcore.status",
    "ExperimentUnitStatus": "xcore.status",
    "WorkUnitStatus": "xcore.status",
    # plugin authors
    "hookimpl": "xcore.hooks.markers",
    "JobHandle": "xcore.hooks.execution",
    "LaunchRequest": "xcore.hooks.execution",
    "LaunchContext": "xcore.hooks.execution",
    "PackagingContext": "xcore.hooks.execution",
    "MetadataStore": "xcore.store",
    # errors
    "XcoreError": "xcore.errors",
    "ConfigurationError": "xcore.errors",
    "ResourceSpecError": "xcore.errors",
    "UnknownKindError": "xcore.errors",
    "DuplicateKindError": "xcore.errors",
    "PluginLoadError": "xcore.errors",
    "PackagingError": "xcore.errors",
    "LaunchError": "xcore.errors",
    "NotFoundError": "xcore.errors",
    "ExperimentUnitError": "xcore.errors",
    "ExperimentUnitFailedError": "xcore.errors",
    "ExperimentUnitNotCompletedError": "xcore.errors",
    "ReloadError": "xcore.errors",
    "DebugInterrupt": "xcore.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

TYPE_CHECKING = False  # type checkers treat this as typing.TYPE_CHECKING; importing typing costs startup


if TYPE_CHECKING:  # static type checkers and IDEs see the real names
    from xcore.errors import *  # noqa: F403
    from xcore.hooks.execution import JobHandle, LaunchContext, LaunchRequest, PackagingContext
    from xcore.hooks.markers import hookimpl
    from xcore.launch import core, job_operators
    from xcore.launch.args import SequentialArgs, UserArgs, merge_args
    from xcore.launch.bazel import BazelBinary, BazelContainer, bazel_binary, bazel_container
    from xcore.launch.core import LaunchedJob
    from xcore.launch.executables import (
        Binary,
        BinaryDependency,
        CommandList,
        Container,
        Dockerfile,
        ModuleName,
        PythonContainer,
        PythonModule,
    )
    from xcore.launch.experiment import Experiment
    from xcore.launch.job_blocks import (
        Constraint,
        Executable,
        ExecutableSpec,
        Executor,
        ExecutorSpec,
        Job,
        JobConfig,
        JobGeneratorType,
        JobGroup,
        JobType,
        Packageable,
        get_args_for_all_jobs,
    )
    from xcore.launch.packagables import binary, container, dockerfile_container, python_container, python_module
    from xcore.launch.quantities import GB, KB, MB, PB, TB, GiB, Hr, KiB, MiB, Min, PiB, Sec, TiB, vCPU
    from xcore.launch.registry import create_experiment, get_experiment, list_experiments
    from xcore.launch.resources import (
        AcceleratorType,
        Architecture,
        GpuType,
        InvalidTpuTopologyError,
        JobRequirements,
        ResourceDict,
        ResourceQuantity,
        ResourceType,
        ServiceTier,
        Topology,
        TpuType,
    )
    from xcore.launch.units import (
        AuxiliaryUnit,
        AuxiliaryUnitJob,
        AuxiliaryUnitRole,
        ContextAnnotations,
        ExperimentUnit,
        ExperimentUnitRole,
        Importance,
        LaunchFuture,
        MetadataContext,
        WorkUnit,
        WorkUnitCompletedAwaitable,
        WorkUnitRole,
    )
    from xcore.launch.utils import ShellSafeArg, run_in_asyncio_loop
    from xcore.status import ExperimentUnitStatus, JobState, Status, WorkUnitStatus
    from xcore.store import MetadataStore
