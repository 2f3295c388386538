"""lxm3's ``xm_cluster`` names on xhpc, so an lxm3 launch script ports by its imports:
``from lxm3 import xm_cluster`` becomes ``from xhpc import xm_cluster``, ``from lxm3 import xm``
becomes ``import xcore as xm``.

Executors keep lxm3's field names and positions and return xhpc's (or xlocal's) own executor;
``ArrayJob`` is one work unit whose tasks are submitted as one array job. Where xhpc works
differently (containers are specs, not executor options) the difference is an error that says
what to write instead. See docs/porting.md.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from xcore import (
    CommandList,
    Executable,
    ExecutableSpec,
    Executor,
    ExecutorSpec,
    Job,
    JobConfig,
    JobGroup,
    JobRequirements,
    ModuleName,
    SequentialArgs,
)
from xcore.plugin import from_launch_dir
from xhpc.executables import Fileset, PythonPackage, UniversalPackage
from xhpc.executables import SingularityContainer as _XhpcSingularityContainer
from xhpc.executors import GridEngineSpec, SlurmSpec


@attrs.define
class SingularityOptions:
    """lxm3's container options: ``bind`` maps host paths to container paths and
    ``extra_options`` go to ``singularity exec``. In xhpc they belong to the container spec:
    pass them with ``xm_cluster.SingularityContainer(entrypoint, image_path, options)``."""

    bind: dict[str, str] = attrs.field(factory=dict)
    extra_options: list[str] = attrs.field(factory=list, converter=list)


@attrs.define
class DockerOptions:
    """lxm3's Docker options for cluster jobs (``volumes``, ``extra_options``)."""

    volumes: dict[str, str] = attrs.field(factory=dict)
    extra_options: list[str] = attrs.field(factory=list, converter=list)


def SingularityContainer_(
    entrypoint: Any, image_path: str, options: SingularityOptions | None = None
) -> _XhpcSingularityContainer:
    """``SingularityContainer(entrypoint, image_path)``, optionally with SingularityOptions."""
    options = options or SingularityOptions()
    return _XhpcSingularityContainer(entrypoint, image_path, binds=dict(options.bind),
                                     options=tuple(options.extra_options))


def _name_from_path(path: str) -> str:
    """lxm3's executable name: the project directory's name with non-word characters as ``_``."""
    return re.sub(r"\W", "_", os.path.basename(os.path.abspath(path).rstrip(os.sep))) or "package"


def _options(value: DockerOptions | None) -> DockerOptions:
    return DockerOptions() if value is None else value


@attrs.frozen
class DockerContainer(ExecutableSpec):
    """lxm3: run a packaged ``entrypoint`` (PythonPackage, UniversalPackage, PexBinary) inside
    the Docker ``image`` with ``docker run`` on the node. The package directory (and the working
    directory) are bind-mounted at the same paths, the job's environment variables are passed
    by name, the container runs as the job's user and is removed when it ends. Docker options
    (``volumes``, ``extra_options``) come as the optional third argument
    ``DockerOptions(...)`` (lxm3 takes them on the executor)."""

    entrypoint: Any
    image: str
    options: DockerOptions = attrs.field(default=None, converter=_options)

    @property
    def name(self) -> str:
        return getattr(self.entrypoint, "name", "docker")


@attrs.frozen
class PexBinary(ExecutableSpec):
    """lxm3: a Python program packed as a PEX with the ``pex`` tool (``pip install pex``):
    ``packages``/``modules`` are passed to ``pex --package/--module``, ``dependencies`` (Filesets)
    are shipped next to the ``.pex``; the job runs ``./NAME.pex`` from the package directory.
    Its dependencies come from the job's environment (``--inherit-path=fallback``)."""

    entrypoint: ModuleName
    path: str = attrs.field(default=".", converter=from_launch_dir)
    packages: tuple[str, ...] = attrs.field(default=(), converter=tuple, kw_only=True)
    modules: tuple[str, ...] = attrs.field(default=(), converter=tuple, kw_only=True)
    dependencies: tuple[Any, ...] = attrs.field(default=(), converter=tuple)

    @property
    def name(self) -> str:
        return _name_from_path(self.path)


@attrs.frozen
class PDMProject(ExecutableSpec):
    """lxm3: a PDM project run with its locked dependencies (``pdm export`` of ``lock_file``;
    needs ``pip install pdm``) on ``base_image``. xhpc ships the dependencies and the project in
    one archive and runs it in ``base_image`` with Singularity/Apptainer (``docker://`` is added
    to a bare image name); ``base_image=None`` runs it on the cluster's own ``python3``."""

    entrypoint: ModuleName | CommandList
    base_image: str | None
    lock_file: str = "pdm.lock"
    path: str = attrs.field(default=".", converter=from_launch_dir)
    resources: tuple[Any, ...] = attrs.field(default=(), converter=tuple)
    extra_packages: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    pip_args: tuple[str, ...] = attrs.field(default=("--no-deps", "--no-compile"), converter=tuple)

    @property
    def name(self) -> str:
        return _name_from_path(self.path)


@attrs.frozen
class PythonContainer(ExecutableSpec):
    """lxm3: a Python project installed into an image on ``base_image`` from ``requirements``.
    Not packaged by xhpc yet: use ``PythonPackage`` inside a ``SingularityContainer``."""

    entrypoint: ModuleName | CommandList
    base_image: str
    requirements: str = "requirements.txt"
    path: str = "."

    @property
    def name(self) -> str:
        return "python_container"


def _no_container_options(executor: str, singularity_options: Any, docker_options: Any) -> None:
    if docker_options is not None:
        raise ValueError(
            f"xm_cluster.{executor}(docker_options=...): in xhpc Docker options belong to the spec; write "
            "xm_cluster.DockerContainer(entrypoint, image, DockerOptions(...))."
        )
    if singularity_options is not None:
        raise ValueError(
            f"xm_cluster.{executor}(singularity_options=/docker_options=...): in xhpc container options belong "
            "to the spec; write xm_cluster.SingularityContainer(entrypoint, image_path, SingularityOptions(...))."
        )


def _requirements(value: Any) -> JobRequirements:
    return JobRequirements() if value is None else value


class _Factory:
    """A name that builds another plugin's executor, keeping ``Name.Spec()`` working."""

    Spec: Any = ExecutorSpec


class Slurm(_Factory):
    """lxm3's ``Slurm(requirements, resources, walltime, ...)``, built as an ``xhpc.Slurm``.

    ``resources`` entries become ``#SBATCH --key=value`` lines; ``walltime`` takes seconds
    (``10 * xm.Min``) or a timedelta. Keywords lxm3 lacks (``cluster=``, ``time_limit=``...)
    go to ``xhpc.Slurm`` as is.
    """

    Spec = SlurmSpec

    def __new__(  # type: ignore[misc]
        cls,
        requirements: JobRequirements | None = None,
        resources: Mapping[str, Any] | None = None,
        walltime: Any = None,
        singularity_options: SingularityOptions | None = None,
        docker_options: DockerOptions | None = None,
        log_directory: str | None = None,
        modules: Sequence[str] = (),
        exclusive: bool = False,
        partition: str | None = None,
        extra_directives: Sequence[str] = (),
        skip_directives: Sequence[str] = (),
        **xhpc_fields: Any,
    ) -> Executor:
        from xhpc.executors import Slurm as XhpcSlurm

        _no_container_options("Slurm", singularity_options, docker_options)
        _unsupported("Slurm", log_directory=log_directory, skip_directives=list(skip_directives) or None)
        directives = [f"--{key}={value}" for key, value in (resources or {}).items()] + list(extra_directives)
        if walltime is not None:
            xhpc_fields.setdefault("time_limit", walltime)
        return XhpcSlurm(requirements=_requirements(requirements), modules=list(modules), exclusive=exclusive,
                         partition=partition, directives=directives + list(xhpc_fields.pop("directives", [])),
                         **xhpc_fields)


class GridEngine(_Factory):
    """lxm3's ``GridEngine(requirements, resources, parallel_environments, walltime, queue, ...)``,
    built as an ``xhpc.GridEngine`` (``resources`` are ``-l key=value``; one parallel
    environment is supported; ``max_parallel_tasks`` is ``-tc``)."""

    Spec = GridEngineSpec

    def __new__(  # type: ignore[misc]
        cls,
        requirements: JobRequirements | None = None,
        resources: Mapping[str, Any] | None = None,
        parallel_environments: Mapping[str, int] | None = None,
        walltime: Any = None,
        queue: str | None = None,
        reserved: bool | None = None,
        log_directory: str | None = None,
        merge_output: bool = True,
        shell: str = "/bin/bash",
        project: str | None = None,
        account: str | None = None,
        modules: Sequence[str] = (),
        max_parallel_tasks: int | None = None,
        extra_directives: Sequence[str] = (),
        skip_directives: Sequence[str] = (),
        singularity_options: SingularityOptions | None = None,
        docker_options: DockerOptions | None = None,
        **xhpc_fields: Any,
    ) -> Executor:
        from xhpc.executors import GridEngine as XhpcGridEngine

        _no_container_options("GridEngine", singularity_options, docker_options)
        _unsupported("GridEngine", log_directory=log_directory, skip_directives=list(skip_directives) or None,
                     merge_output=None if merge_output else False, shell=None if shell == "/bin/bash" else shell)
        environments = dict(parallel_environments or {})
        if len(environments) > 1:
            raise ValueError("xm_cluster.GridEngine: xhpc supports one parallel environment per job.")
        fields: dict[str, Any] = {
            "requirements": _requirements(requirements),
            "resources": {k: str(v) for k, v in (resources or {}).items()},
            "queue": queue, "project": project, "account": account, "modules": list(modules),
            "max_parallel_tasks": max_parallel_tasks, "reserve": bool(reserved),
            "directives": list(extra_directives) + list(xhpc_fields.pop("directives", [])),
        }
        if environments:
            [(name, slots)] = environments.items()
            fields["parallel_environment"] = name
            if fields["requirements"].cpu is None:
                fields["requirements"] = fields["requirements"].merge(JobRequirements(cpu=slots))
        if walltime is not None:
            fields["time_limit"] = walltime
        fields.update(xhpc_fields)
        return XhpcGridEngine(**fields)


class Local(_Factory):
    """lxm3's ``Local(requirements, singularity_options, docker_options)``: runs on this
    machine as an ``xlocal.Local`` (install ``xcore-xlocal``)."""

    Spec: Any = None

    def __new__(  # type: ignore[misc]
        cls,
        requirements: JobRequirements | None = None,
        singularity_options: SingularityOptions | None = None,
        docker_options: DockerOptions | None = None,
    ) -> Executor:
        import xlocal

        _no_container_options("Local", singularity_options, docker_options)
        return xlocal.Local(_requirements(requirements))


def _local_spec() -> Any:
    try:
        from xlocal.executors import LocalSpec
    except ImportError:  # xlocal not installed: Local() says so when called
        return ExecutorSpec
    return LocalSpec


Local.Spec = _local_spec()


def _unsupported(executor: str, **values: Any) -> None:
    given = [name for name, value in values.items() if value is not None]
    if given:
        raise ValueError(f"xm_cluster.{executor}: {', '.join(given)} is not supported by xhpc; leave it out.")


def _sequential(value: Any) -> SequentialArgs:
    return value if isinstance(value, SequentialArgs) else SequentialArgs.from_collection(value)


def _broadcast(args: list[SequentialArgs], env_vars: list[dict[str, str]]) -> tuple[list, list]:
    if len(args) == len(env_vars):
        return args, env_vars
    if min(len(args), len(env_vars)) != 1:
        raise ValueError(
            f"ArrayJob: args ({len(args)} entries) and env_vars ({len(env_vars)}) must have the same length, "
            "or one of them a single entry for every task."
        )
    size = max(len(args), len(env_vars))
    if len(args) == 1:
        args = [copy.deepcopy(args[0]) for _ in range(size)]
    if len(env_vars) == 1:
        env_vars = [copy.deepcopy(env_vars[0]) for _ in range(size)]
    return args, env_vars


@attrs.define
class ArrayJob(JobConfig):
    """One work unit of many tasks that differ only in args/env: ``ArrayJob(executable,
    executor, args=[{'seed': 1}, {'seed': 2}], env_vars=[{...}, {...}])``. A single entry of
    ``args`` or ``env_vars`` is used for every task. Tasks are named ``<name>_<index>``
    (index from 0) and submitted together, i.e. as one array job."""

    executable: Executable
    executor: Executor
    name: str | None = None
    args: list[SequentialArgs] = attrs.field(factory=lambda: [SequentialArgs()],
                                             converter=lambda v: [_sequential(a) for a in v])
    env_vars: list[dict[str, str]] = attrs.field(factory=lambda: [{}], converter=list)

    def __attrs_post_init__(self) -> None:
        if not self.args and not self.env_vars:
            raise ValueError("ArrayJob needs at least one task: give args=[...] or env_vars=[...].")
        self.args, self.env_vars = _broadcast(self.args, self.env_vars)

    def expand(self) -> JobGroup:
        base = self.name or self.executable.name
        group = JobGroup()  # filled by name: a dict unpacked as **kwargs would also match ``constraints``
        group.jobs.update({
            f"{base}_{index}": Job(self.executable, self.executor, name=f"{base}_{index}", args=args, env_vars=env)
            for index, (args, env) in enumerate(zip(self.args, self.env_vars, strict=True))  # equal: _broadcast
        })
        return group


class ucl:  # noqa: N801 - lxm3's module name: `from lxm3.contrib import ucl` ports to this
    """lxm3's ``lxm3.contrib.ucl`` (presets for UCL's CS and Myriad Grid Engine clusters) is not
    part of xhpc: ``UclGridEngine`` says what to write instead. Scripts that use it only when
    launching on those clusters (lxm3's examples) run unchanged everywhere else."""

    @staticmethod
    def UclGridEngine(requirements: Any = None, **kwargs: Any) -> Executor:  # noqa: N802 - lxm3's name
        raise ValueError(
            "ucl.UclGridEngine (lxm3.contrib.ucl) is not part of xhpc: write the cluster's resources yourself, "
            "e.g. xm_cluster.GridEngine(requirements, resources={'h_rt': ..., 'tmem': ...}, "
            "parallel_environments={'smp': 4}, walltime=...), with the cluster configured in clusters.toml.")


def create_experiment(experiment_title: str, project: str | None = None) -> Any:
    """lxm3's ``create_experiment(experiment_title, project=None)``; a project becomes the tag
    ``project:<name>``."""
    import xcore

    return xcore.create_experiment(experiment_title, tags=[f"project:{project}"] if project else [])


def get_current_experiment() -> Any:
    """The experiment whose context is active; RuntimeError outside one (as lxm3)."""
    from xcore import core

    experiment = core.get_current_experiment()
    if experiment is None:
        raise RuntimeError("get_current_experiment requires an experiment context")
    return experiment


SingularityContainer = SingularityContainer_

__all__ = [
    "ArrayJob", "CommandList", "DockerContainer", "DockerOptions", "Fileset", "GridEngine", "JobRequirements",
    "Local", "ModuleName", "PDMProject", "PexBinary", "PythonContainer", "PythonPackage", "SingularityContainer",
    "SingularityOptions", "Slurm", "UniversalPackage", "create_experiment", "get_current_experiment",
]
