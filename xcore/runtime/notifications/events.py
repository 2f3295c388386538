"""Events read from recorded job states: what happened, under an id that names it for good.

An event's id is built only from what it is about (``exp-12/unit-3/failed/attempt-1``), never
from who saw it or when, so every observer that sees the same change builds the same id and the
store keeps it once. An event is a JSON-ready dict (``SCHEMA`` is its version)::

    {"schema": 1, "id": "exp-12/unit-3/failed/attempt-1", "type": "unit_failed", "at": 1700000000.0,
     "experiment": {"id": 12, "title": "...", "tags": [...], "user": "alice", "counts": {"FAILED": 1, ...}},
     "unit": {"id": 3, "status": "FAILED", "message": "exit code 1", "exit_code": 1, "attempt": 1},
     "text": "xcore experiment 12 (...): work unit 3 failed (exit code 1)"}
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from xcore.model.status import Status

if TYPE_CHECKING:
    from xcore.store import MetadataStore
    from xcore.store.records import ExperimentRecord, JobRecord, WorkUnitRecord

SCHEMA = 1


def attempt_of(job: JobRecord) -> int:
    """The attempt a job is on (1 where the store does not count attempts)."""
    return int(getattr(job, "attempt", None) or 1)


def _experiment(record: ExperimentRecord) -> dict[str, Any]:
    return {"id": record.id, "title": record.title, "tags": list(record.tags), "user": record.user,
            "counts": dict(sorted(record.status_counts.items()))}


def _event(kind: str, event_id: str, record: ExperimentRecord, text: str, **more: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "id": event_id, "type": kind, "at": time.time(), "experiment": _experiment(record),
            **more, "text": f"xcore experiment {record.id} ({record.title}): {text}"}


def _unit(unit: WorkUnitRecord) -> dict[str, Any]:
    failed = [j for j in unit.jobs if j.status is Status.FAILED]
    shown = failed[0] if failed else (unit.jobs[0] if unit.jobs else None)
    return {"id": unit.id, "status": unit.status.value, "message": shown.message if shown else "",
            "exit_code": shown.exit_code if shown else None,
            "attempt": max((attempt_of(j) for j in unit.jobs), default=1),
            "jobs": [{"id": j.id, "name": j.name, "status": j.status.value} for j in unit.jobs]}


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {status.lower()}" for status, n in sorted(counts.items()))


def from_changes(store: MetadataStore, changed: Sequence[JobRecord], *, failures: int = 0) -> list[dict[str, Any]]:
    """The events the changed jobs make: their units that failed, their retries, and per
    experiment the failure count reaching ``failures`` and the end."""
    events: list[dict[str, Any]] = []
    by_experiment: dict[int, set[int]] = {}
    for job in changed:
        by_experiment.setdefault(job.experiment_id, set()).add(job.work_unit_id)
    for experiment_id, unit_ids in sorted(by_experiment.items()):
        record = store.get_experiment(experiment_id)
        units = store.work_units(experiment_id, sorted(unit_ids))
        # The store's records of the changed jobs, not the observer's: a duty that ran before
        # this one (the relaunch of a retry pending) may have moved a job to its next attempt.
        ids = {j.id for j in changed if j.experiment_id == experiment_id}
        events += unit_events(record, units, [j for unit in units for j in unit.jobs if j.id in ids])
        events += experiment_events(record, failures=failures)
    return events


def of_experiment(store: MetadataStore, experiment_id: int, *, failures: int = 0) -> list[dict[str, Any]]:
    """Every event the experiment's recorded state makes now, whether or not a change was seen
    (jobs that failed to launch, or ended before their launcher marked the experiment launched,
    are recorded without an observer's refresh)."""
    record = store.get_experiment(experiment_id)
    events: list[dict[str, Any]] = []
    if record.status_counts.get(Status.FAILED.value):
        failed = [u.id for u in store.unit_summaries(experiment_id) if u.status is Status.FAILED]
        events += unit_events(record, store.work_units(experiment_id, failed))
    return events + experiment_events(record, failures=failures)


def unit_events(record: ExperimentRecord, units: Iterable[WorkUnitRecord],
                changed: Sequence[JobRecord] = ()) -> list[dict[str, Any]]:
    events = []
    for unit in units:
        if unit.status is Status.FAILED:
            body = _unit(unit)
            reason = f" ({body['message']})" if body["message"] else ""
            events.append(_event("unit_failed", f"exp-{record.id}/unit-{unit.id}/failed/attempt-{body['attempt']}",
                                 record, f"work unit {unit.id} failed{reason}", unit=body))
    for job in changed:
        events += retry_events(record, job)
    return events


def retry_events(record: ExperimentRecord, job: JobRecord) -> list[dict[str, Any]]:
    """One ``retry`` per attempt after the first, up to the job's current one: an attempt no
    observer saw (a backend that retried twice between two polls) still gets its event, late,
    with the job's state now. The store keeps each id once, so repeating them costs nothing."""
    current = attempt_of(job)
    events = []
    for attempt in range(2, current + 1):
        now = "" if attempt == current else f" (now on attempt {current})"
        events.append(_event(
            "retry", f"exp-{record.id}/unit-{job.work_unit_id}/job-{job.id}/retry/attempt-{attempt}", record,
            f"work unit {job.work_unit_id} job {job.name} {'is on' if not now else 'went to'} attempt {attempt}{now}",
            unit={"id": job.work_unit_id}, job={"id": job.id, "name": job.name, "attempt": attempt,
                                                "current_attempt": current, "status": job.status.value,
                                                "message": job.message}))
    return events


def experiment_events(record: ExperimentRecord, *, failures: int = 0) -> list[dict[str, Any]]:
    """The experiment's end (every unit finished, and its launcher done adding them) and its
    failures reaching the threshold."""
    events = []
    counts = record.status_counts
    failed = counts.get(Status.FAILED.value, 0)
    if failures and failed >= failures:
        events.append(_event("failures_reached", f"exp-{record.id}/failures-{failures}", record,
                             f"{failed} work units failed (threshold {failures})", failures=failed))
    finished = counts and all(s in Status.__members__ and Status(s).is_terminal for s in counts)
    if finished and record.launch_status != "LAUNCHING":
        events.append(_event("experiment_ended", f"exp-{record.id}/ended", record,
                             f"ended: {record.status.value.lower()} ({_counts(counts)})",
                             status=record.status.value, counts=dict(sorted(counts.items()))))
    return events


def waiting(store: MetadataStore, experiment_ids: Sequence[int], longer_than: float,
            now: float | None = None) -> list[dict[str, Any]]:
    """Jobs PENDING for more than ``longer_than`` seconds since they were handed to the backend."""
    now = time.time() if now is None else now
    events = []
    records: dict[int, ExperimentRecord] = {}
    for job in store.active_jobs(list(experiment_ids)):
        since = job.launched_at or job.created_at
        if job.status is not Status.PENDING or not since or now - since <= longer_than:
            continue
        record = records.get(job.experiment_id) or records.setdefault(job.experiment_id,
                                                                      store.get_experiment(job.experiment_id))
        minutes = (now - since) / 60
        events.append(_event(
            "waiting", f"exp-{record.id}/unit-{job.work_unit_id}/job-{job.id}/waiting/attempt-{attempt_of(job)}",
            record, f"work unit {job.work_unit_id} job {job.name} has waited {minutes:.0f} min ({job.message})",
            unit={"id": job.work_unit_id}, job={"id": job.id, "name": job.name, "message": job.message,
                                                "waiting_secs": round(now - since, 1)}))
    return events
