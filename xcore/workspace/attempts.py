"""One attempt of a retried job as it was then (its handle and log), for ``xcore logs
--attempt K`` and the dashboard's attempt log links alike."""

from __future__ import annotations

import attrs

from xcore.errors import NotFoundError, XcoreError
from xcore.store import MetadataStore
from xcore.store.records import JobRecord


def attempt_of(store: MetadataStore, experiment_id: int, unit_id: int, job: JobRecord, number: int) -> JobRecord:
    """``job`` as it was in attempt ``number``. A backend that kept one log for every attempt
    (xlocal's runner, Slurm's requeue) shows that whole log."""
    if number < 1:
        raise XcoreError(f"--attempt counts from 1, got {number}.")
    info = store.job_attempts(experiment_id, [unit_id]).get(job.id)
    current = job.attempt if info is None else info.current
    if number == current:
        return job
    earlier = next((a for a in (info.earlier if info else []) if a.number == number), None)
    if earlier is None:
        raise NotFoundError(f"Job {job.name} of {experiment_id}/{unit_id} has no attempt {number}; it is on attempt "
                            f"{current}.")
    if earlier.handle is None:  # the backend retried by itself and kept one log (or none) for all attempts
        return job
    return attrs.evolve(job, handle=earlier.handle, handle_kind=earlier.handle_kind, log_path=earlier.log_path,
                        status=earlier.status)
