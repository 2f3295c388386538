"""xcore: launch and track machine-learning experiments on any compute backend.

The launch API keeps XManager's names, so ``from xmanager import xm`` becomes
``import xcore as xm``. Names load on first use, so ``import xcore`` stays fast.
"""

from __future__ import annotations

from xcore.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # launch API
    "create_experiment": "xcore.experiment",
    "get_experiment": "xcore.experiment",
    "list_experiments": "xcore.experiment",
    "Experiment": "xcore.experiment",
    "ExperimentUnit": "xcore.experiment",
    "WorkUnit": "xcore.experiment",
    "AuxiliaryUnit": "xcore.experiment",
    "AuxiliaryUnitJob": "xcore.experiment",
    "AuxiliaryUnitRole": "xcore.experiment",
    "WorkUnitRole": "xcore.experiment",
    "ExperimentUnitRole": "xcore.experiment",
    "Importance": "xcore.experiment",
    "MetadataContext": "xcore.experiment",
    "ContextAnnotations": "xcore.experiment",
    "WorkUnitCompletedAwaitable": "xcore.experiment",
    "LaunchFuture": "xcore.experiment",
    "LaunchedJob": "xcore.core",
    "core": "xcore.core",
    "job_operators": "xcore.job_operators",
    "ShellSafeArg": "xcore.utils",
    "run_in_asyncio_loop": "xcore.utils",
    # job blocks
    "ExecutableSpec": "xcore.job_blocks",
    "Executable": "xcore.job_blocks",
    "ExecutorSpec": "xcore.job_blocks",
    "Executor": "xcore.job_blocks",
    "Packageable": "xcore.job_blocks",
    "Job": "xcore.job_blocks",
    "JobGroup": "xcore.job_blocks",
    "JobConfig": "xcore.job_blocks",
    "JobGeneratorType": "xcore.job_blocks",
    "JobType": "xcore.job_blocks",
    "Constraint": "xcore.job_blocks",
    "get_args_for_all_jobs": "xcore.job_blocks",
    "SequentialArgs": "xcore.args",
    "UserArgs": "xcore.args",
    "merge_args": "xcore.args",
    # executable specs and helpers
    "Binary": "xcore.executables",
    "BinaryDependency": "xcore.executables",
    "PythonModule": "xcore.executables",
    "Container": "xcore.executables",
    "PythonContainer": "xcore.executables",
    "Dockerfile": "xcore.executables",
    "ModuleName": "xcore.executables",
    "CommandList": "xcore.executables",
    "BazelBinary": "xcore.bazel",
    "BazelContainer": "xcore.bazel",
    "bazel_binary": "xcore.bazel",
    "bazel_container": "xcore.bazel",
    "binary": "xcore.packagables",
    "python_module": "xcore.packagables",
    "container": "xcore.packagables",
    "python_container": "xcore.packagables",
    "dockerfile_container": "xcore.packagables",
    # resources and units
    "JobRequirements": "xcore.resources",
    "ResourceType": "xcore.resources",
    "AcceleratorType": "xcore.resources",
    "GpuType": "xcore.resources",
    "TpuType": "xcore.resources",
    "Topology": "xcore.resources",
    "InvalidTpuTopologyError": "xcore.resources",
    "Architecture": "xcore.resources",
    "ServiceTier": "xcore.resources",
    "ResourceDict": "xcore.resources",
    "ResourceQuantity": "xcore.resources",
    "vCPU": "xcore.units", "KB": "xcore.units", "MB": "xcore.units", "GB": "xcore.units",
    "TB": "xcore.units", "PB": "xcore.units", "KiB": "xcore.units", "MiB": "xcore.units",
    "GiB": "xcore.units", "TiB": "xcore.units", "PiB": "xcore.units",
    "Sec": "xcore.units", "Min": "xcore.units", "Hr": "xcore.units",
    # status
    "Status": "xcore.status",
    "JobState": "xcore.status",
    "ExperimentUnitStatus": "xcore.status",
    "WorkUnitStatus": "xcore.status",
    # plugin authors
    "hookimpl": "xcore.markers",
    "JobHandle": "xcore.execution",
    "LaunchRequest": "xcore.execution",
    "LaunchContext": "xcore.execution",
    "PackagingContext": "xcore.execution",
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
    from xcore import core, job_operators
    from xcore.args import SequentialArgs, UserArgs, merge_args
    from xcore.bazel import BazelBinary, BazelContainer, bazel_binary, bazel_container
    from xcore.core import LaunchedJob
    from xcore.errors import *  # noqa: F403
    from xcore.executables import (
        Binary,
        BinaryDependency,
        CommandList,
        Container,
        Dockerfile,
        ModuleName,
        PythonContainer,
        PythonModule,
    )
    from xcore.execution import JobHandle, LaunchContext, LaunchRequest, PackagingContext
    from xcore.experiment import (
        AuxiliaryUnit,
        AuxiliaryUnitJob,
        AuxiliaryUnitRole,
        ContextAnnotations,
        Experiment,
        ExperimentUnit,
        ExperimentUnitRole,
        Importance,
        LaunchFuture,
        MetadataContext,
        WorkUnit,
        WorkUnitCompletedAwaitable,
        WorkUnitRole,
        create_experiment,
        get_experiment,
        list_experiments,
    )
    from xcore.job_blocks import (
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
    from xcore.markers import hookimpl
    from xcore.packagables import binary, container, dockerfile_container, python_container, python_module
    from xcore.resources import (
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
    from xcore.status import ExperimentUnitStatus, JobState, Status, WorkUnitStatus
    from xcore.store import MetadataStore
    from xcore.units import GB, KB, MB, PB, TB, GiB, Hr, KiB, MiB, Min, PiB, Sec, TiB, vCPU
    from xcore.utils import ShellSafeArg, run_in_asyncio_loop
