"""Running recorded jobs again as their next attempt: the relaunch of a retry pending
(``xcore.runtime.retries``) and ``xcore retry`` share it.

The jobs keep their ids, work units, arguments and executables; each is claimed in the store
(``begin_attempts``: its attempt archived, the next one LAUNCHING under this process's
launcher lease) and then submitted through a ``BatchLauncher``, so the jobs of one executor
kind are one submission (one Slurm array for a thousand failed tasks) and a process killed
between claiming and recording the submission is resolved like a launcher killed mid-launch.

Secrets stay redacted in the store. A job whose stored environment holds redacted values gets
the real ones from its backend (``xcore_job_env``: xlocal's 0600 batch file, a cluster's 0600
task file); where they are gone the job is refused with the names of the missing variables,
never run with ``<redacted>``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from xcore.errors import ExperimentUnitError
from xcore.model import datamodel
from xcore.model.execution import LaunchRequest
from xcore.model.status import JobState, Status
from xcore.progress import Progress
from xcore.runtime.launcher import BatchLauncher, LazyFuture, PendingJob, UnitTicket
from xcore.runtime.retries import backoff_over, is_pending, policy_of
from xcore.store.redaction import REDACTED

if TYPE_CHECKING:
    from xcore.hooks.host import PluginHost
    from xcore.store import MetadataStore
    from xcore.store.records import JobRecord


@datamodel.define
class Resubmitted:
    """What a resubmission did: jobs submitted as a new attempt, jobs refused (job id ->
    why), jobs another process claimed first, and the launch errors."""

    submitted: list[int]
    refused: dict[int, str]
    taken: list[int]
    errors: list[str]


def real_env(host: PluginHost, job: JobRecord) -> tuple[dict[str, str] | None, list[str]]:
    """The job's environment with its secrets, and the names of the variables whose values are
    gone (then the env is None). Arguments that held a URL password (masked in the store) are
    gone for good: such a job is refused too."""
    if any(REDACTED in arg for arg in job.args):  # a URL password in an argument: no backend gives it back
        return None, ["the password in its arguments' URL"]
    redacted = sorted(name for name, value in job.env.items() if value == REDACTED)
    if not redacted:
        return dict(job.env), []
    kept = None
    if job.handle_kind and job.handle is not None:
        try:
            kept = host.job_env(job.handle_kind, host.serializer.load(job.handle))
        except Exception:  # noqa: BLE001 - a backend that cannot tell keeps nothing
            kept = None
    missing = [name for name in redacted if kept is None or name not in kept]
    if missing:
        return None, missing
    assert kept is not None
    return {**job.env, **{name: kept[name] for name in redacted}}, []


def refusal(missing: Sequence[str]) -> str:
    return (f"cannot run it again: the values of {', '.join(missing)} are redacted in the store and its backend "
            "no longer keeps them; launch it anew with those variables set")


def resubmit(store: MetadataStore, host: PluginHost, experiment_id: int, jobs: Sequence[JobRecord], *,
             reason: str, progress: Progress | None = None, record_refusals: bool = True) -> Resubmitted:
    """Claim each job's next attempt and submit the claimed ones, one batch per executor kind.
    ``reason`` names why in the jobs' messages (``retry``: a policy's, ``xcore retry``: the user's).
    ``record_refusals``: a job refused for its secrets is recorded FAILED with the reason (a
    relaunch the user did not ask for must say why it did not happen)."""
    progress = progress or Progress()
    refused: dict[int, str] = {}
    ready: list[tuple[JobRecord, dict[str, str]]] = []
    for job in jobs:
        env, missing = real_env(host, job)
        if env is None:
            refused[job.id] = refusal(missing)
        else:
            ready.append((job, env))
    if refused and record_refusals:
        store.record_states([(job_id, JobState(Status.FAILED, f"{reason} refused: {why}", failure="launch"))
                             for job_id, why in refused.items()])
    if not ready:
        return Resubmitted([], refused, [], [])
    title = store.get_experiment(experiment_id).title
    launcher = BatchLauncher(store, host, progress, title, ExperimentUnitError, experiment_id)
    lease = launcher.lease_id()
    by_id = {job.id: (job, env) for job, env in ready}
    claimed = set(store.begin_attempts([(job.id, job.attempt, job.status.value) for job, _ in ready], lease,
                                       f"{reason}: submitting the next attempt"))
    taken = [job.id for job, _ in ready if job.id not in claimed]
    pending: list[PendingJob] = []
    refused_late: list[tuple[int, JobState]] = []
    serializer = host.serializer
    recent: list[tuple[Any, Any]] = []  # (stored spec, rebuilt object), the last few distinct ones
    by_text: dict[str, Any] = {}

    def load(spec: Any) -> Any:
        """Each distinct stored spec rebuilt once: a sweep's 1,000 jobs share one executor and
        one executable (rebuilding each was half the cost of ``xcore retry``), and shared
        objects let the backend group the requests as the launch did. A spec equal to one of
        the last few (dict equality) needs no encoding; others are looked up by their JSON."""
        for stored, rebuilt in reversed(recent):
            if stored == spec:
                return rebuilt
        key = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        if key not in by_text:
            by_text[key] = serializer.load(spec)
        recent.append((spec, by_text[key]))
        del recent[:-8]
        return by_text[key]

    for job_id in sorted(claimed):
        job, env = by_id[job_id]
        try:
            executor: Any = load(job.executor)
            executable: Any = load(job.executable)
        except Exception as exc:  # noqa: BLE001 - e.g. the plugin is gone: say so on the job
            refused_late.append((job_id, JobState(Status.FAILED, f"{reason} failed to launch: {exc}",
                                                  failure="launch")))
            continue
        request = LaunchRequest(job.id, job.experiment_id, job.work_unit_id, job.name, executable, executor,
                                list(job.args), env, retry=policy_of(job.executor.get("retry")),
                                attempt=job.attempt + 1)
        pending.append(PendingJob(request, job.executor_kind, UnitTicket(LazyFuture(), None, 1)))
    if refused_late:
        store.record_states(refused_late)
        refused.update({job_id: state.message for job_id, state in refused_late})
    try:
        if pending:
            launcher.submit(pending)
    finally:
        launcher.close()
    errors = [str(error) for error in launcher.errors]
    failed = {p.request.job_id for p in pending if p.ticket.future.done() and p.ticket.future.exception()}
    return Resubmitted([p.request.job_id for p in pending if p.request.job_id not in failed], refused, taken,
                       errors)


def relaunch_pending(store: MetadataStore, host: PluginHost, changed: Sequence[JobRecord]) -> None:
    """The observers' duty: relaunch the retries pending among ``changed`` whose backoff is over."""
    due: dict[int, list[JobRecord]] = {}
    for job in changed:
        if not is_pending(job):
            continue
        due.setdefault(job.experiment_id, []).append(job)
    for experiment_id, jobs in due.items():
        units = {u.id: u for u in store.work_units(experiment_id, sorted({j.work_unit_id for j in jobs}))}
        wanted = {j.id: j for j in jobs}
        records = [full for unit in units.values() for full in unit.jobs
                   if full.id in wanted and is_pending(full) and full.attempt == wanted[full.id].attempt
                   and backoff_over(store, full)]
        if records:
            resubmit(store, host, experiment_id, records, reason="retry")
