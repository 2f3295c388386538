"""Handles that find a cluster job again from any later process."""

from __future__ import annotations

import attrs

from xcore.plugin import JobHandle


@attrs.define
class ClusterHandle(JobHandle):
    """Task ``task`` of array job ``job_id`` on cluster ``cluster``.

    ``index`` is the task's row in the run's task file; ``log_path`` (inherited, keyword-only)
    is its output on the cluster. A job whose submission failed while others of the same
    launch went through is a ``LaunchFailure``, not a handle (handles stored by older versions
    may carry ``error``; status then reports FAILED with it). An empty ``job_id`` means the
    scheduler's reply was lost (dropped connection): status reads the id from
    ``chunk-<chunk>.id`` in ``run_dir``. ``attempt`` is the attempt number the task's first
    run is (1, or N+1 for ``xcore retry``); a requeue or reschedule counts on from it.
    """

    cluster: str
    job_id: str
    task: int
    index: int
    run_dir: str
    local: bool = False
    submitted_at: float = 0.0
    chunk: int = 0
    attempt: int = 1

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
