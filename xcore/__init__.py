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
    "job_operators": "xcore.model.job_operators",
    "ShellSafeArg": "xcore.model.utils",
    "run_in_asyncio_loop": "xcore.model.utils",
    "utils": "xcore.model.utils",
    # job blocks
    "ExecutableSpec": "xcore.model.job_blocks",
    "Executable": "xcore.model.job_blocks",
    "ExecutorSpec": "xcore.model.job_blocks",
    "Executor": "xcore.model.job_blocks",
    "Packageable": "xcore.model.job_blocks",
    "Job": "xcore.model.job_blocks",
    "JobGroup": "xcore.model.job_blocks",
    "JobConfig": "xcore.model.job_blocks",
    "JobGeneratorType": "xcore.model.job_blocks",
    "JobType": "xcore.model.job_blocks",
    "Constraint": "xcore.model.job_blocks",
    "get_args_for_all_jobs": "xcore.model.job_blocks",
    "SequentialArgs": "xcore.model.args",
    "UserArgs": "xcore.model.args",
    "merge_args": "xcore.model.args",
    # executable specs and helpers
    "Binary": "xcore.model.executables",
    "BinaryDependency": "xcore.model.executables",
    "PythonModule": "xcore.model.executables",
    "Container": "xcore.model.executables",
    "PythonContainer": "xcore.model.executables",
    "Dockerfile": "xcore.model.executables",
    "ModuleName": "xcore.model.executables",
    "CommandList": "xcore.model.executables",
    "BazelBinary": "xcore.model.bazel",
    "BazelContainer": "xcore.model.bazel",
    "bazel_binary": "xcore.model.bazel",
    "bazel_container": "xcore.model.bazel",
    "binary": "xcore.model.packagables",
    "python_module": "xcore.model.packagables",
    "container": "xcore.model.packagables",
    "python_container": "xcore.model.packagables",
    "dockerfile_container": "xcore.model.packagables",
    # resources and units
    "JobRequirements": "xcore.model.resources",
    "Distributed": "xcore.model.distributed",
    "ResourceType": "xcore.model.resources",
    "AcceleratorType": "xcore.model.resources",
    "GpuType": "xcore.model.resources",
    "TpuType": "xcore.model.resources",
    "Topology": "xcore.model.resources",
    "InvalidTpuTopologyError": "xcore.model.resources",
    "Architecture": "xcore.model.resources",
    "ServiceTier": "xcore.model.resources",
    "ResourceDict": "xcore.model.resources",
    "ResourceQuantity": "xcore.model.resources",
    **dict.fromkeys(
        ["vCPU", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "PiB", "Sec", "Min", "Hr"],
        "xcore.model.quantities"),
    # status
    "Status": "xcore.model.status",
    "JobState": "xcore.model.status",
    "Retry": "xcore.model.retry",
    "ExperimentUnitStatus": "xcore.model.status",
    "WorkUnitStatus": "xcore.model.status",
    # plugin authors
    "hookimpl": "xcore.hooks.markers",
    "JobHandle": "xcore.model.execution",
    "LaunchRequest": "xcore.model.execution",
    "LaunchContext": "xcore.model.execution",
    "PackagingContext": "xcore.model.execution",
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
    from xcore.hooks.markers import hookimpl
    from xcore.launch import core
    from xcore.launch.core import LaunchedJob
    from xcore.launch.experiment import Experiment
    from xcore.launch.registry import create_experiment, get_experiment, list_experiments
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
    from xcore.model import job_operators, utils
    from xcore.model.args import SequentialArgs, UserArgs, merge_args
    from xcore.model.bazel import BazelBinary, BazelContainer, bazel_binary, bazel_container
    from xcore.model.distributed import Distributed
    from xcore.model.executables import (
        Binary,
        BinaryDependency,
        CommandList,
        Container,
        Dockerfile,
        ModuleName,
        PythonContainer,
        PythonModule,
    )
    from xcore.model.execution import JobHandle, LaunchContext, LaunchRequest, PackagingContext
    from xcore.model.job_blocks import (
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
    from xcore.model.packagables import binary, container, dockerfile_container, python_container, python_module
    from xcore.model.quantities import GB, KB, MB, PB, TB, GiB, Hr, KiB, MiB, Min, PiB, Sec, TiB, vCPU
    from xcore.model.resources import (
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
    from xcore.model.retry import Retry
    from xcore.model.status import ExperimentUnitStatus, JobState, Status, WorkUnitStatus
    from xcore.model.utils import ShellSafeArg, run_in_asyncio_loop
    from xcore.store import MetadataStore
