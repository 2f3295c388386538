"""Handles that find a cluster job again from any later process."""

from __future__ import annotations

import attrs

from xcore.execution import JobHandle


@attrs.define
class ClusterHandle(JobHandle):
    """Task ``task`` of array job ``job_id`` on cluster ``cluster``.

    ``index`` is the task's row in the run's task file; ``log_path`` is its output on the
    cluster. ``error`` is set (and ``job_id`` empty) when this job's submission failed while
    others of the same launch went through: status then reports FAILED with the error. An
    empty ``job_id`` without ``error`` means the scheduler's reply was lost (dropped
    connection): status reads the id from ``chunk-<chunk>.id`` in ``run_dir``.
    """

    cluster: str
    job_id: str
    task: int
    index: int
    run_dir: str
    log_path: str
    local: bool = False
    submitted_at: float = 0.0
    error: str | None = None
    chunk: int = 0

    @property
    def task_id(self) -> str:
        raise NotImplementedError


@attrs.define
class SlurmHandle(ClusterHandle):
    @property
    def task_id(self) -> str:
        return f"{self.job_id}_{self.task}"


@attrs.define
class GridEngineHandle(ClusterHandle):
    @property
    def task_id(self) -> str:
        return f"{self.job_id}.{self.task}"
