"""Operations on job structures (XManager's ``xm.job_operators``): copy, name, flatten and
group jobs by their constraints. Useful to plugins and libraries that walk a JobGroup."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from xcore.model import datamodel
from xcore.model.job_blocks import Constraint, Job, JobGroup, JobType, is_job_generator


def shallow_copy_job_type(job_type: Any) -> Any:
    """A copy of the structure (groups and jobs) that shares executables and executors."""
    if is_job_generator(job_type):
        return job_type
    if isinstance(job_type, JobGroup):
        result = copy.copy(job_type)
        result.jobs = {name: shallow_copy_job_type(member) for name, member in job_type.jobs.items()}
        return result
    return copy.copy(job_type)


def populate_job_names(job_type: Any) -> None:
    """Give each unnamed job a name: its path of group keys joined by ``_``, or for a lone job
    its executable's name."""

    def visit(path: list[str], node: Any) -> None:
        if isinstance(node, Job):
            if node.name is None:
                node.name = "_".join(path) if path else node.executable.name
        elif isinstance(node, JobGroup):
            for key, member in node.jobs.items():
                visit([*path, key], member)

    visit([], job_type)


def collect_jobs_by_filter(job_group: JobGroup, predicate: Callable[[Job], bool]) -> list[Job]:
    """Every job in the group (depth first) for which ``predicate`` holds."""

    def collect(node: Any) -> list[Job]:
        if isinstance(node, Job):
            return [node] if predicate(node) else []
        if isinstance(node, JobGroup):
            return [job for member in node.jobs.values() for job in collect(member)]
        raise TypeError(f"Unsupported job_type: {node!r}")

    return collect(job_group)


def flatten_jobs(job_group: JobGroup) -> list[Job]:
    return collect_jobs_by_filter(job_group, lambda _: True)


@datamodel.define
class ConstraintClique:
    """A constraint and all the jobs (including nested ones) of the group that declared it."""

    constraint: Constraint
    jobs: list[Job]
    group_name: str | None = None
    size: int | None = None
    parent_group_name: str | None = None


def aggregate_constraint_cliques(job_group: JobGroup) -> list[ConstraintClique]:
    """One clique per constraint found in the group tree, outer groups first."""
    counter = 0

    def new_name() -> str:
        nonlocal counter
        name = f"jobgroup_{counter}_{uuid.uuid4().hex}"
        counter += 1
        return name

    def visit(node: Any, parent: str | None) -> tuple[list[ConstraintClique], list[Job]]:
        if isinstance(node, Job):
            return [], [node]
        if not isinstance(node, JobGroup):
            raise TypeError(f"Unsupported job_type: {node!r}")
        name = new_name()
        cliques: list[ConstraintClique] = []
        jobs: list[Job] = []
        for member in node.jobs.values():
            sub_cliques, sub_jobs = visit(member, name if node.constraints else None)
            cliques += sub_cliques
            jobs += sub_jobs
        own = [ConstraintClique(c, jobs, name, len(node.jobs), parent) for c in node.constraints]
        return own + cliques, jobs

    return visit(job_group, None)[0]


def get_jobs(job_group: JobGroup) -> dict[str, JobType]:
    """Jobs by name (nested groups flattened); a name used twice is a ValueError."""
    jobs: dict[str, JobType] = {}

    def put(name: str, job: JobType) -> None:
        if name in jobs:
            raise ValueError(f"{name} is duplicated in the experiment.")
        jobs[name] = job

    for key, value in job_group.jobs.items():
        if isinstance(value, Job):
            put(str(value.name), value)
        elif isinstance(value, JobGroup):
            jobs.update(get_jobs(value))
        else:
            put(key, value)
    return jobs


__all__: Sequence[str] = (
    "ConstraintClique", "aggregate_constraint_cliques", "collect_jobs_by_filter", "flatten_jobs", "get_jobs",
    "populate_job_names", "shallow_copy_job_type",
)
