"""``xcore retry`` and ``experiment.retry(...)``: run the failed (or cancelled, or lost) jobs of
some work units again, as the next attempt of the same units.

Which jobs: those of the chosen kinds that did not complete, in units none of whose jobs is
active (a unit still running is refused: retry it once it ended). They keep their ids,
arguments and executables; the jobs of one executor kind are one submission
(``xcore.runtime.resubmit``). A job whose secrets are gone is refused with their names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from xcore.errors import XcoreError
from xcore.model import datamodel
from xcore.model.status import Status
from xcore.progress import Progress
from xcore.runtime.retries import is_pending

if TYPE_CHECKING:
    from xcore.hooks.host import PluginHost
    from xcore.runtime.resubmit import Resubmitted
    from xcore.store import MetadataStore
    from xcore.store.records import JobRecord


@datamodel.define
class RetryPlan:
    """What a retry chose: the jobs to run again, the units refused (unit id -> why), and
    once submitted what happened."""

    jobs: list[JobRecord]
    refused: dict[int, str]
    done: Resubmitted | None = None

    @property
    def units(self) -> list[int]:
        return sorted({job.work_unit_id for job in self.jobs})


def _kind(job: JobRecord) -> str | None:
    """``failed``, ``lost`` or ``cancelled`` for a job a retry may run again; None otherwise."""
    if job.status is Status.CANCELLED:
        return "cancelled"
    if job.status is Status.FAILED:
        return "lost" if job.message.startswith("lost:") else "failed"
    return None


def plan_retry(store: MetadataStore, host: PluginHost, experiment_id: int, work_unit_ids: Sequence[int] | None = None,
               *, failed: bool = True, cancelled: bool = False, lost: bool = False, warm: bool = False) -> RetryPlan:
    """The jobs a retry would submit, checking each unit (active: refused; secrets gone: refused).
    ``warm``: the backends start connecting as soon as the units are read (a retry to submit)."""
    kinds = {name for name, wanted in (("failed", failed), ("cancelled", cancelled), ("lost", lost)) if wanted}
    if not kinds:
        raise XcoreError("Nothing to retry: name --failed, --cancelled or --lost (or several).")
    store.get_experiment(experiment_id)  # an unknown experiment is an error naming it
    units = store.work_units(experiment_id, work_unit_ids)
    if work_unit_ids is not None and len(units) < len(set(work_unit_ids)):
        missing = sorted(set(work_unit_ids) - {u.id for u in units})
        raise XcoreError(f"Experiment {experiment_id} has no work unit {', '.join(map(str, missing))} "
                         f"(see `xcore show {experiment_id}`).")
    if warm:
        _warm_up(host, [job for unit in units for job in unit.jobs if _kind(job) in kinds])
    from xcore.runtime.resubmit import real_env, refusal  # after the warm-up: its import overlaps the handshake

    jobs: list[JobRecord] = []
    refused: dict[int, str] = {}
    for unit in units:
        chosen = [job for job in unit.jobs if _kind(job) in kinds]
        if not chosen:
            continue
        active = [job for job in unit.jobs if job.status.is_active or is_pending(job)]
        if active:
            refused[unit.id] = (f"work unit {experiment_id}/{unit.id} is still active ({active[0].status.value}); "
                                "retry it once it ended")
            continue
        gone = sorted({name for job in chosen for name in real_env(host, job)[1]})
        if gone:
            refused[unit.id] = f"work unit {experiment_id}/{unit.id}: {refusal(gone)}"
            continue
        jobs += chosen
    return RetryPlan(jobs, refused)


def _warm_up(host: PluginHost, jobs: Sequence[JobRecord]) -> None:
    """Rebuild one stored executor per kind now: a backend that connects somewhere starts its
    connection as its executor is made (xhpc's SSH handshake), and so it overlaps the claiming
    and the requests built before the submission (a quarter of ``xcore retry``'s wall time on a
    1,000-task sweep over SSH was that handshake). Errors are left to the submission."""
    seen: set[str] = set()
    for job in jobs:
        if job.executor_kind in seen:
            continue
        seen.add(job.executor_kind)
        try:
            host.serializer.load(job.executor)
        except Exception:  # noqa: BLE001 - said by the submission, job by job
            continue


def retry(store: MetadataStore, host: PluginHost, experiment_id: int, work_unit_ids: Sequence[int] | None = None,
          *, failed: bool = True, cancelled: bool = False, lost: bool = False, dry_run: bool = False,
          progress: Progress | None = None) -> RetryPlan:
    """Plan the retry and, unless ``dry_run``, submit it: one submission per executor kind."""
    plan = plan_retry(store, host, experiment_id, work_unit_ids, failed=failed, cancelled=cancelled, lost=lost,
                      warm=not dry_run)
    if not dry_run and plan.jobs:
        from xcore.runtime.resubmit import resubmit

        plan.done = resubmit(store, host, experiment_id, plan.jobs, reason="xcore retry", progress=progress,
                             record_refusals=False)
        for job_id, why in plan.done.refused.items():
            unit = next(job.work_unit_id for job in plan.jobs if job.id == job_id)
            plan.refused[unit] = f"work unit {experiment_id}/{unit}: {why}"
    return plan
