"""The building blocks of an experiment, with XManager's names and meaning.

An ``ExecutableSpec`` says *what* to run, an ``ExecutorSpec``/``Executor`` says *where*.
``Packageable`` pairs them; packaging turns it into an ``Executable``. A ``Job`` is one
packaged executable on one executor; a ``JobGroup`` runs several jobs together.
Backends subclass these and register each subclass under a unique kind (see ``kinds``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import attrs

from xcore.model import datamodel
from xcore.model.args import SequentialArgs, UserArgs, merge_args
from xcore.model.resources import JobRequirements
from xcore.model.retry import Retry, check_retry
from xcore.model.validation import check_field_types


def _to_args(value: UserArgs) -> SequentialArgs:
    return value if isinstance(value, SequentialArgs) else SequentialArgs.from_collection(value)


def _to_env(value: Mapping[str, Any] | None) -> dict[str, str]:
    if not value:  # a job without env of its own (a sweep's usual job): nothing to check
        return {}
    env = dict(value)
    for key, val in env.items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(
                f"Environment variable name {key!r} is invalid: use letters, digits and "
                "underscores, not starting with a digit."
            )
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            env[key] = str(val)
        elif not isinstance(val, str):
            raise TypeError(
                f"Environment variable {key} is of type {type(val).__name__} ({val!r:.60}); environment values "
                "are text: give a str (numbers are converted)."
            )
        if "\0" in env[key]:
            raise ValueError(f"Environment variable {key} contains a NUL byte, which no process can receive.")
    return env


def _to_requirements(value: JobRequirements | Mapping[str, Any] | None) -> JobRequirements:
    if value is None:
        return JobRequirements()
    if isinstance(value, JobRequirements):
        return value
    return JobRequirements(**dict(value))


class ExecutableSpec:
    """What to run, before packaging. Subclasses are attrs classes registered under a kind."""

    @property
    def name(self) -> str:
        return type(self).__name__.lower()


@datamodel.define(kw_only=True)
class Executable:
    """A packaged, ready-to-run artifact produced by a packaging hook."""

    name: str
    args: SequentialArgs = attrs.field(factory=SequentialArgs, converter=_to_args)
    env_vars: dict[str, str] = attrs.field(factory=dict, converter=_to_env)


class ExecutorSpec:
    """Where an executable will run, as far as packaging needs to know (e.g. Local.Spec())."""


@datamodel.define(kw_only=True)
class Executor:
    """Where and how a job runs. Subclasses set ``Spec`` to their ExecutorSpec class.

    Every field's value is checked against its annotation when the executor is built (and
    again at ``experiment.add``), so ``Local(kill_grace_secs="five")`` fails at once with the
    field and the expected type. A subclass that defines ``__attrs_post_init__`` calls
    ``super().__attrs_post_init__()`` to be checked at construction too.
    """

    Spec: ClassVar[type[ExecutorSpec]] = ExecutorSpec
    requirements: JobRequirements = attrs.field(factory=JobRequirements, converter=_to_requirements)
    retry: Retry | None = attrs.field(default=None, kw_only=True)
    """The retry policy of every job on this executor (``xm.Retry``); None: the default
    (preemption and node failure, up to 3 attempts). A job's own ``retry=`` overrides it."""

    def __attrs_post_init__(self) -> None:
        check_field_types(self)

    def check_policy(self, retry: Retry) -> None:
        """Raise a one-line error naming the fix if jobs on this executor cannot run under an
        explicit ``retry`` policy (the job's, else the executor's): called at
        ``experiment.add``, never for the default policy nor for a relaunch. A backend
        overrides it where retrying needs something of the executor (xgcp: a checkpoint bucket)."""


@datamodel.define
class Packageable:
    """An executable spec to package for an executor spec, with default args and env."""

    executable_spec: ExecutableSpec
    executor_spec: ExecutorSpec
    args: SequentialArgs = attrs.field(factory=SequentialArgs, converter=_to_args)
    env_vars: dict[str, str] = attrs.field(factory=dict, converter=_to_env)


@datamodel.define
class Job:
    """One executable on one executor, with its own args and environment. ``retry`` (keyword)
    is its retry policy (``xm.Retry``), overriding its executor's."""

    executable: Executable
    executor: Executor
    name: str | None = None
    args: SequentialArgs = attrs.field(factory=SequentialArgs, converter=_to_args)
    env_vars: dict[str, str] = attrs.field(factory=dict, converter=_to_env)
    retry: Retry | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        check_retry(self.retry, "Job(retry=...)")
        # Anything may stand in for the executable and executor (XManager's own tests, and their
        # users', build jobs of mocks); ``experiment.add`` checks them (``check_job``). Only the
        # usual mistakes are refused here, with what to do instead.
        if isinstance(self.executable, (ExecutableSpec, Packageable)):
            raise TypeError(_unpackaged(self.executable))
        if isinstance(self.executor, ExecutorSpec):
            raise TypeError(f"Job.executor must be an Executor such as xlocal.Local(), got the executor spec "
                            f"{self.executor!r} (that is what packaging takes).")


def _unpackaged(executable: object) -> str:
    hint = (" Package it first: `[exe] = experiment.package([xm.binary(...)])`."
            if isinstance(executable, (ExecutableSpec, Packageable)) else "")
    return f"Job.executable must be a packaged Executable, got {type(executable).__name__}.{hint}"


def check_job(job: Job) -> None:
    """What ``experiment.add`` needs of a job: a packaged executable and an executor."""
    if not isinstance(job.executable, Executable):
        raise TypeError(_unpackaged(job.executable))
    if not isinstance(job.executor, Executor):
        raise TypeError(f"Job.executor must be an Executor such as xlocal.Local(), got {job.executor!r}.")


class Constraint:
    """Where a job group may run relative to itself (same machine, same network, ...).

    Backends define concrete constraints; ``JobGroup(..., constraints=[...])`` carries them.
    """


class JobGroup:
    """Jobs that form one work unit and are launched together: ``JobGroup(train=job1, eval=job2)``.

    As in XManager, a group may start empty and be filled later (``group.jobs['eval'] = job``);
    members are checked when the group is added to an experiment.
    """

    def __init__(self, *, constraints: Sequence[Constraint] | None = None, **jobs: Job | JobGroup) -> None:
        for name, job in jobs.items():
            if not isinstance(job, (Job, JobGroup)):
                raise TypeError(f"JobGroup member {name!r} must be a Job or JobGroup, got {type(job).__name__}.")
        self.jobs: dict[str, Job | JobGroup] = dict(jobs)
        self.constraints: list[Constraint] = list(constraints) if constraints else []

    def __repr__(self) -> str:
        return f"JobGroup({', '.join(self.jobs)})"


class JobConfig:
    """Base for custom job descriptions that expand into jobs (e.g. an HPC array job).

    A subclass that defines ``expand()`` (returning a Job or JobGroup) can be given to
    ``experiment.add`` and ``work_unit.add`` directly.
    """

    def expand(self) -> Job | JobGroup:
        raise TypeError(
            f"{type(self).__name__} is a JobConfig that xcore cannot launch: it defines no expand() into jobs."
        )


JobGeneratorType = Callable[..., Awaitable[Any]]
JobType = Job | JobGroup | JobGeneratorType | JobConfig
JobTypeVar = TypeVar("JobTypeVar", Job, JobGroup, JobGeneratorType, JobConfig)


def is_job_generator(job: object) -> bool:
    return callable(job) and not isinstance(job, (Job, JobGroup, JobConfig))


def get_args_for_all_jobs(job: JobType, args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``add(..., args=...)`` value that gives every job of ``job`` the same flags:
    ``{'args': args}`` for a job, nested by member name for a group."""
    if isinstance(job, JobGroup):
        return {name: get_args_for_all_jobs(member, args) for name, member in job.jobs.items()}
    return {"args": dict(args)}


def job_args_with_overrides(job: Job, overrides: Mapping[str, Any] | None) -> tuple[SequentialArgs, dict[str, str]]:
    """Merge ``experiment.add(job, args={'args': ..., 'env_vars': ...})`` into a job's own."""
    if not overrides:  # a sweep's usual add: the job carries its own args
        # Nothing to merge into (an executable without args of its own): the job's args as they
        # are, not a copy (the caller only renders them).
        args = merge_args(job.executable.args, job.args) if job.executable.args else job.args
        args.validate()
        executable_env, env = job.executable.env_vars, job.env_vars
        return args, {**executable_env, **env} if executable_env else dict(env)
    overrides = dict(overrides)
    unknown = set(overrides) - {"args", "env_vars"}
    if unknown:
        raise ValueError(
            f"experiment.add(job, args=...) takes the keys 'args' and 'env_vars', got {sorted(unknown)}. "
            "To pass flags write args={'args': {'lr': 0.1}}, or put them in xm.Job(args=...)."
        )
    args = merge_args(job.executable.args, job.args, overrides.get("args"))
    args.validate()
    env = {**job.executable.env_vars, **job.env_vars, **_to_env(overrides.get("env_vars"))}
    return args, env


to_requirements = _to_requirements  # public name for plugins (xcore.plugin): requirements from any accepted form
