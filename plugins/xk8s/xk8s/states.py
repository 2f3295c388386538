"""From listed Jobs and Pods (plain dicts) to one xcore ``JobState`` per trial.

The reason a user needs comes first in the message: ``OOMKilled``, ``ImagePullBackOff``,
``Unschedulable``, ``preempted``/``evicted``, ``DeadlineExceeded`` (a trial over its time limit),
``waiting for Kueue admission`` with the Kueue Workload's own reason.

A failed trial also gets its failure class (``JobState.failure``, docs/long-runs.md) from
Kubernetes' own signals: the pod's ``DisruptionTarget`` condition (preemption, eviction, a lost
node), its ``DeadlineExceeded`` reason or the Job's, the container's ``OOMKilled``, a pod that
never started (image pull, unschedulable: ``launch``), else the program's exit code (``error``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import attrs

from xcore import plugin as xp
from xk8s import manifests as mf

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"
_WAITING_PROBLEMS = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError",
                     "CreateContainerError", "CrashLoopBackOff"}


def parse_indexes(text: str | None) -> set[int]:
    """``"0-3,7"`` -> {0, 1, 2, 3, 7} (the Job status's completedIndexes / failedIndexes)."""
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part.strip():
            continue
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


def timestamp(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def cancelled_indexes(job: dict[str, Any]) -> list[int]:
    raw = (job.get("metadata", {}).get("annotations") or {}).get(mf.ANNOTATION_CANCELLED, "[]")
    try:
        return [int(i) for i in json.loads(raw)]
    except (ValueError, TypeError):
        return []


def pod_index(pod: dict[str, Any]) -> int | None:
    meta = pod.get("metadata", {})
    value = (meta.get("labels") or {}).get(mf.INDEX_LABEL) or (meta.get("annotations") or {}).get(mf.INDEX_LABEL)
    return int(value) if value is not None else None


def pod_job(pod: dict[str, Any]) -> str | None:
    labels = pod.get("metadata", {}).get("labels") or {}
    return labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")


def main_status(pod: dict[str, Any]) -> dict[str, Any]:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if status.get("name") == mf.CONTAINER:
            return status
    return {}


def has_started(pod: dict[str, Any]) -> bool:
    state = main_status(pod).get("state") or {}
    return "running" in state or "terminated" in state


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


@attrs.define
class Snapshot:
    jobs: dict[str, dict[str, Any]]
    pods: dict[tuple[str, int], list[dict[str, Any]]]
    #: Kueue Workloads by the uid of the Job they stand for (listed only when a Job waits for Kueue).
    workloads: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    #: Why the Workloads could not be read (RBAC), said instead of their reason.
    workloads_error: str | None = None
    _indexes: dict[str, tuple[set[int], set[int], set[int]]] = attrs.field(factory=dict)

    def indexes(self, job: str) -> tuple[set[int], set[int], set[int]]:
        """Completed, failed and cancelled indexes of ``job``, parsed once."""
        if job not in self._indexes:
            obj = self.jobs.get(job) or {}
            status = obj.get("status") or {}
            self._indexes[job] = (parse_indexes(status.get("completedIndexes")),
                                  parse_indexes(status.get("failedIndexes")), set(cancelled_indexes(obj)))
        return self._indexes[job]

    @classmethod
    def of(cls, jobs: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> Snapshot:
        by_trial: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        for pod in pods:
            job, index = pod_job(pod), pod_index(pod)
            if job is not None and index is not None:
                by_trial[(job, index)].append(pod)
        for group in by_trial.values():
            group.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
        return cls({j["metadata"]["name"]: j for j in jobs}, dict(by_trial))

    def latest_pod(self, job: str, index: int) -> dict[str, Any] | None:
        pods = self.pods.get((job, index))
        return pods[-1] if pods else None

    def pods_of(self, job: str, indexes: Iterable[int]) -> list[dict[str, Any]]:
        return [p for i in indexes for p in self.pods.get((job, i), [])
                if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]

    def index_done(self, job: str, index: int) -> bool:
        completed, failed, _ = self.indexes(job)
        return index in completed or index in failed


#: DisruptionTarget reasons (and pod status reasons) that mean the node went away, not that the
#: scheduler or an eviction took the pod back.
_NODE_REASONS = {"DeletionByTaintManager", "DeletionByPodGC", "NodeLost", "NodeShutdown", "Terminated",
                 "Shutdown"}


def disruption_class(pod: dict[str, Any] | None) -> str | None:
    """``preempted`` or ``node_failure`` for a pod Kubernetes disrupted; None for any other pod."""
    if not pod:
        return None
    cond = _condition(pod, "DisruptionTarget")
    reason = (cond or {}).get("reason") or pod.get("status", {}).get("reason")
    if cond is None and reason not in ("Evicted", *_NODE_REASONS):
        return None
    return "node_failure" if reason in _NODE_REASONS else "preempted"


def failure_class(pod: dict[str, Any] | None, state: xp.JobState) -> str:
    """The class of a failed trial whose latest pod is ``pod`` (``state``: what its exit says)."""
    disrupted = disruption_class(pod)
    if disrupted:
        return disrupted
    if pod and pod.get("status", {}).get("reason") == "DeadlineExceeded":
        return "timeout"
    if _terminated(pod).get("reason") == "OOMKilled":
        return "out_of_memory"
    if pod and not has_started(pod) and not _terminated(pod):
        return "launch"  # never ran: the image could not be pulled, no node would take it
    return "error"


def attempt_of(snap: Snapshot, job: str, index: int, first: int) -> int:
    """The attempt the trial is on: the submission's (``first``) plus each earlier pod of its
    index (a pod Kubernetes replaced, counted or ignored by the failure policy) and each restart
    of its JobSet (the Job's ``restart-attempt`` label)."""
    labels = (snap.jobs.get(job) or {}).get("metadata", {}).get("labels") or {}
    restarts = labels.get(RESTART_LABEL, "0")
    return first + (int(restarts) if restarts.isdigit() else 0) + max(0, len(snap.pods.get((job, index), [])) - 1)


def _terminated(pod: dict[str, Any] | None) -> dict[str, Any]:
    return ((main_status(pod).get("state") or {}).get("terminated") or {}) if pod else {}


def _ended(pod: dict[str, Any] | None, code_default: int | None = None) -> xp.JobState:
    term = _terminated(pod)
    code = term.get("exitCode", code_default)
    started, ended = timestamp(term.get("startedAt")), timestamp(term.get("finishedAt"))
    if pod and pod.get("status", {}).get("reason") == "DeadlineExceeded":  # the pod's activeDeadlineSeconds
        limit = pod.get("spec", {}).get("activeDeadlineSeconds")
        return xp.JobState(xp.Status.FAILED, f"DeadlineExceeded: the trial ran longer than its time limit "
                                             f"({limit} s, time_limit_secs)", code, started, ended, failure="timeout")
    state = xp.exit_state(code, started_at=started, ended_at=ended)
    if state.status is xp.Status.FAILED and term.get("reason") == "OOMKilled":
        state = attrs.evolve(state, message=f"OOMKilled: out of memory ({state.message})")
    if code is None:
        state = xp.JobState(xp.Status.FAILED, "failed (no exit code reported)")
    if state.status is xp.Status.FAILED:
        disrupted = _disrupted(pod) if pod else None
        if disrupted:
            state = attrs.evolve(state, message=f"{disrupted}; {state.message}")
        state = attrs.evolve(state, failure=failure_class(pod, state))
    return state


def _why_pending(pod: dict[str, Any]) -> str:
    waiting = (main_status(pod).get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in _WAITING_PROBLEMS:
        return f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('reason', 'Unschedulable')}: {cond.get('message', '')}".rstrip(": ")
    return waiting.get("reason") or "pod pending"


def _disrupted(pod: dict[str, Any]) -> str | None:
    cond = _condition(pod, "DisruptionTarget")
    if cond:
        reason = cond.get("reason", "DisruptionTarget")
        what = "preempted" if "Preemption" in reason else "evicted"
        return f"{what} ({reason}: {cond.get('message', '')})".replace(": )", ")")
    if pod.get("status", {}).get("reason") == "Evicted":
        return f"evicted ({pod['status'].get('message', '')})"
    return None


def waits_for_kueue(job: dict[str, Any]) -> bool:
    return bool(job.get("spec", {}).get("suspend")) and QUEUE_LABEL in (job["metadata"].get("labels") or {})


def workload_owner(job: dict[str, Any]) -> str:
    """The uid Kueue labels the Workload with: the JobSet's for a JobSet's Job, else the Job's."""
    if JOBSET_LABEL in (job["metadata"].get("labels") or {}):
        for ref in job["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "JobSet" and ref.get("uid"):
                return str(ref["uid"])
    return str(job["metadata"].get("uid", ""))


def kueue_reason(job: dict[str, Any], workloads: dict[str, dict[str, Any]], error: str | None = None) -> str:
    """Why a suspended Job waits: its Kueue Workload's conditions say (no quota, no such queue, evicted)."""
    queue = (job["metadata"].get("labels") or {}).get(QUEUE_LABEL)
    if not queue:
        return "suspended"
    head = f"waiting for Kueue admission (queue {queue})"
    workload = workloads.get(workload_owner(job))
    if workload is None and error:
        return f"{head}; {error}"
    if workload is None:
        return f"{head}: no Kueue Workload yet (is Kueue installed and watching this namespace?)"
    conditions = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or []}
    evicted = conditions.get("Evicted")
    if evicted and evicted.get("status") == "True":
        return f"evicted by Kueue ({evicted.get('reason')}: {evicted.get('message', '')}); {head}"
    reserved = conditions.get("QuotaReserved")
    if reserved and reserved.get("status") == "True":
        admitted = conditions.get("Admitted") or {}
        return f"{head}: quota reserved, waiting for admission checks: {admitted.get('message', '')}".rstrip(": ")
    if reserved:
        return f"{head}: {reserved.get('reason', 'Pending')}: {reserved.get('message', '')}".rstrip(": ")
    return f"{head}: not yet considered by Kueue"


def state_of(snap: Snapshot, job_name: str, index: int, *, locally_cancelled: bool = False,
             first_attempt: int = 1) -> xp.JobState:
    """The trial's state, with its failure class and attempt (``first_attempt``: the submission's).

    A trial Kubernetes ran again (more than one pod for its index) also reports its earlier
    pods as earlier attempts, each with its class and exit code."""
    state = _state_of(snap, job_name, index, locally_cancelled)
    if job_name not in snap.jobs:
        return state
    pods = snap.pods.get((job_name, index), [])
    attempt = attempt_of(snap, job_name, index, first_attempt)
    if len(pods) > 1:
        earlier = []
        for number, pod in enumerate(pods[:-1], start=attempt - len(pods) + 1):
            ended = _ended(pod)
            earlier.append(xp.Attempt(number, ended.status, ended.failure, ended.exit_code, ended.started_at,
                                      ended.ended_at, ended.message))
        return attrs.evolve(state, attempt=attempt, previous_attempts=tuple(earlier))
    if state.status is xp.Status.FAILED or attempt != first_attempt:
        return attrs.evolve(state, attempt=attempt)
    return state


def _state_of(snap: Snapshot, job_name: str, index: int, locally_cancelled: bool) -> xp.JobState:
    job = snap.jobs.get(job_name)
    if job is None:
        if locally_cancelled:
            return xp.JobState(xp.Status.CANCELLED, "cancelled (Job deleted)")
        return xp.lost_state(f"Job {job_name} no longer exists (deleted, or removed by ttlSecondsAfterFinished)")
    pod = snap.latest_pod(job_name, index)
    completed, failed_indexes, cancelled_set = snap.indexes(job_name)
    cancelled = locally_cancelled or index in cancelled_set
    if index in completed:
        return _ended(pod, 0)
    if index in failed_indexes:
        state = _ended(pod)
        return xp.JobState(xp.Status.CANCELLED, "cancelled", state.exit_code, state.started_at, state.ended_at) \
            if cancelled else state
    if cancelled:
        return xp.JobState(xp.Status.CANCELLED, "cancelled")
    failed = _condition(job, "Failed")
    if failed:
        reason = failed.get("reason", "Failed")
        message = failed.get("message", "")
        if reason == "DeadlineExceeded":
            return xp.JobState(xp.Status.FAILED, f"DeadlineExceeded: the Job ran longer than activeDeadlineSeconds "
                                                 f"({job['spec'].get('activeDeadlineSeconds')} s)", failure="timeout")
        if pod is not None and pod.get("status", {}).get("phase") == "Failed":
            return _ended(pod)  # the pod failure policy or the backoff limit: the pod says why
        failure = "error"
        if pod is not None and not has_started(pod):
            failure = "launch"  # the Job gave up on a pod that never ran (image pull, unschedulable)
        return xp.JobState(xp.Status.FAILED, f"{reason}: {message}".rstrip(": "), failure=failure)
    if job.get("spec", {}).get("suspend"):
        return xp.JobState(xp.Status.PENDING, kueue_reason(job, snap.workloads, snap.workloads_error))
    if pod is None:
        return xp.JobState(xp.Status.PENDING, "waiting for a pod")
    phase = pod.get("status", {}).get("phase")
    retries = len(snap.pods.get((job_name, index), [])) - 1
    if phase in ("Succeeded", "Failed"):
        disrupted = _disrupted(pod)
        if disrupted:
            return xp.JobState(xp.Status.PENDING, f"{disrupted}; will be retried")
        return xp.JobState(xp.Status.PENDING, f"{_ended(pod).message}; waiting for the Job controller")
    if phase == "Running":
        running = (main_status(pod).get("state") or {}).get("running") or {}
        node = pod.get("spec", {}).get("nodeName")
        where = f"on {node}" if node else "running"
        return xp.JobState(xp.Status.RUNNING, where + (f" (retry {retries})" if retries else ""),
                           started_at=timestamp(running.get("startedAt")))
    reason = _why_pending(pod)
    if retries:
        reason += f" (retry {retries})"
    return xp.JobState(xp.Status.PENDING, reason)
