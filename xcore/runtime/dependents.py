"""The observer duty that releases held work units (see ``xcore.runtime.dependencies``).

A unit is held when its backend cannot wait for its dependencies itself (the fake backend,
Kubernetes, Vertex) or they run elsewhere (train on xlocal, evaluate on Kubernetes). Any
process that observes jobs (``xcore wait``, ``show``, the dashboard, ``xcore watch``: see
``xcore.runtime.observers``) runs ``release`` on what it saw end, and ``check_held`` on held
jobs it saw: once every dependency of a held unit ended as its ``when`` asks, one observer
claims the unit in the store (``claim_held``, a compare-and-set: of several observers exactly
one wins) and submits its jobs through the normal launch path (a ``BatchLauncher`` with its
own lease, so a releaser killed mid-way leaves orphans the next command resolves); if one
ended otherwise, the unit is claimed ``cancelled`` and its jobs read CANCELLED with
``dependency 3/1 failed``, and what waits on it is looked at in turn.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from xcore.model.dependencies import DependencyEdge, dependency_message, satisfied
from xcore.model.retry import DEFAULT_RETRY
from xcore.model.status import JobState, Status

if TYPE_CHECKING:
    from xcore.hooks.host import PluginHost
    from xcore.store import MetadataStore
    from xcore.store.records import JobRecord

Unit = tuple[int, int]


def is_held(job: JobRecord) -> bool:
    """A job recorded but not submitted because its unit waits for others."""
    return job.status is Status.PENDING and job.handle is None


def release(store: MetadataStore, host: PluginHost, changed: Sequence[JobRecord]) -> None:
    """The duty: look at the held units that wait for the units of jobs that just ended, and
    say why a job the backend cancelled for its dependency never ran."""
    ended = {(j.experiment_id, j.work_unit_id) for j in changed if j.status.is_terminal}
    if not ended:
        return
    waiting = {(e.experiment_id, e.work_unit_id) for e in store.dependents(sorted(ended))}
    # Seen cancelled now, or waiting on what just ended (whichever of the two is seen first).
    _explain_native_cancels(store, waiting | {(j.experiment_id, j.work_unit_id) for j in changed
                                              if _unexplained(j)})
    check_held(store, host, waiting)


def _unexplained(job: JobRecord) -> bool:
    """Cancelled by its backend before it started, in the backend's own words."""
    return (job.status is Status.CANCELLED and job.started_at is None and job.handle is not None
            and not job.message.startswith("dependency "))


def _explain_native_cancels(store: MetadataStore, units: set[Unit]) -> None:
    """A backend that waited natively cancelled jobs of these units before they started
    (Slurm's ``kill_invalid_depend``) and words it its own way (``cancelled``): where one of
    the unit's dependencies ended otherwise, record ``dependency 3/1 failed`` instead."""
    edges = _edges_of(store, units)  # only a unit that waited for others can have been cancelled for it
    if not edges:
        return  # (a cancelled 100,000-task sweep without dependencies reads no jobs here)
    unexplained = {key: found for key, jobs in _jobs_of(store, edges).items()
                   if (found := [j for j in jobs if _unexplained(j)])}
    if not unexplained:
        return
    jobs_of = _jobs_of(store, {(e.on_experiment_id, e.on_work_unit_id) for found in edges.values() for e in found})
    reasons = []
    for key, jobs in unexplained.items():
        verdict, why = _verdict(edges.get(key, []), jobs_of)
        if verdict == "cancel":
            reasons += [(j.id, JobState(Status.CANCELLED, why, j.exit_code, None, j.ended_at)) for j in jobs]
    if reasons:
        store.record_states(reasons)


def check_held(store: MetadataStore, host: PluginHost, units: Iterable[Unit]) -> None:
    """Release or cancel each of ``units`` that is held and whose dependencies decide it;
    cancelling one looks at what waits on it too (transitively). The store is read per
    experiment, not per unit: a held sweep costs a few reads per look."""
    todo = set(units)
    while todo:
        held = sorted(key for key, state in store.held_states(sorted(todo)).items() if state == "held")
        edges = _edges_of(store, held)
        jobs = _jobs_of(store, {(e.on_experiment_id, e.on_work_unit_id) for found in edges.values() for e in found})
        cancelled: list[Unit] = []
        for key in held:
            verdict, why = _verdict(edges.get(key, []), jobs)
            if verdict == "cancel" and store.claim_held(*key, "cancelled"):
                _cancel(store, key, why)
                cancelled.append(key)
            elif verdict == "go":
                _submit(store, host, key)
        todo = {(e.experiment_id, e.work_unit_id) for e in store.dependents(cancelled)} if cancelled else set()


def _by_experiment(units: Iterable[Unit]) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for experiment_id, unit_id in sorted(set(units)):
        found.setdefault(experiment_id, []).append(unit_id)
    return found


def _edges_of(store: MetadataStore, units: Iterable[Unit]) -> dict[Unit, list[DependencyEdge]]:
    """The dependencies of each of ``units``."""
    found: dict[Unit, list[DependencyEdge]] = {}
    for experiment_id, ids in _by_experiment(units).items():
        for edge in store.dependencies(experiment_id, ids):
            found.setdefault((edge.experiment_id, edge.work_unit_id), []).append(edge)
    return found


def _jobs_of(store: MetadataStore, units: Iterable[Unit]) -> dict[Unit, list[JobRecord]]:
    """The jobs of each of ``units``, as the store has them."""
    return {(experiment_id, unit.id): unit.jobs for experiment_id, ids in _by_experiment(units).items()
            for unit in store.work_units(experiment_id, ids)}


def _verdict(edges: Sequence[DependencyEdge], jobs_of: dict[Unit, list[JobRecord]]) -> tuple[str, str]:
    """``("go", "")`` when every dependency ended as asked, ``("cancel", reason)`` when one
    ended otherwise, ``("wait", "")`` while any runs (``jobs_of``: the dependencies' jobs)."""
    waiting = False
    for edge in edges:
        jobs = [j for j in jobs_of.get((edge.on_experiment_id, edge.on_work_unit_id), [])
                if not edge.on_job or j.name == edge.on_job]
        if not jobs:
            waiting = True
        for job in jobs:
            if not job.status.is_terminal:
                waiting = True
            elif not satisfied(job.status, edge.when):
                return "cancel", dependency_message(edge.on_name, job.status)
    return ("wait", "") if waiting else ("go", "")


CANCELLED_HELD = "cancelled before it was submitted"


def cancel_held(store: MetadataStore, host: PluginHost, jobs: Sequence[JobRecord]) -> list[int]:
    """``xcore cancel`` of held jobs: their units are claimed ``cancelled`` (an observer can no
    longer submit them) and read CANCELLED; what waits on them follows. Returns the jobs this
    call cancelled."""
    units = sorted({(j.experiment_id, j.work_unit_id) for j in jobs if is_held(j)})
    won = [key for key in units if store.claim_held(*key, "cancelled")]
    for key in won:
        _cancel(store, key, CANCELLED_HELD)
    if won:
        check_held(store, host, {(e.experiment_id, e.work_unit_id) for e in store.dependents(won)})
    return [j.id for j in jobs if (j.experiment_id, j.work_unit_id) in set(won)]


def _cancel(store: MetadataStore, key: Unit, why: str) -> None:
    from xcore.runtime.dependencies import forget_request

    units = store.work_units(key[0], [key[1]])
    jobs = [j for j in (units[0].jobs if units else []) if not j.status.is_terminal]
    store.record_states([(j.id, JobState(Status.CANCELLED, why)) for j in jobs])
    for job in jobs:
        forget_request(job.id)


def _submit(store: MetadataStore, host: PluginHost, key: Unit) -> None:
    """Claim the unit and submit its jobs, as the launcher would have (its edges go along:
    a dependency of the same backend's kind is then waited for natively, if it can be)."""
    from xcore.errors import ExperimentUnitError
    from xcore.model.execution import LaunchRequest, launch_failure_message
    from xcore.progress import Progress
    from xcore.runtime.dependencies import forget_request, kept_request
    from xcore.runtime.launcher import BatchLauncher, PendingJob, UnitTicket

    experiment_id, unit_id = key
    title = store.get_experiment(experiment_id).title
    launcher = BatchLauncher(store, host, Progress(enabled=False), title, ExperimentUnitError, experiment_id)
    try:
        if not store.claim_held(experiment_id, unit_id, "released", launcher.lease_id()):
            return  # another observer released it
        edges = store.dependencies(experiment_id, [unit_id])
        units = store.work_units(experiment_id, [unit_id])
        jobs = [j for j in (units[0].jobs if units else []) if j.status is Status.LAUNCHING and j.handle is None]
        ticket = UnitTicket(concurrent.futures.Future(), None, len(jobs))
        pending, failed = [], []
        for job in jobs:
            try:
                kept = kept_request(host, job)
            except Exception as exc:  # noqa: BLE001 - e.g. the plugin is not installed here: this job fails
                failed.append((job.id, JobState(Status.FAILED, launch_failure_message(f"{type(exc).__name__}: {exc}"))))
                continue
            request = LaunchRequest(job.id, experiment_id, unit_id, job.name, kept["executable"], kept["executor"],
                                    kept["args"], kept["env"],
                                    retry=getattr(kept["executor"], "retry", None) or DEFAULT_RETRY)
            pending.append(PendingJob(request, job.executor_kind, ticket, edges))
        if failed:
            store.record_states(failed)
        if pending:
            launcher.submit(pending)
    finally:
        launcher.close()
    for job in jobs:
        forget_request(job.id)
