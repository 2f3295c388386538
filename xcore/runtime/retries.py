"""Retries the backend does not drive: a failed attempt whose policy retries it reads active
("retry pending") and any observing xcore process relaunches it as the next attempt.

A backend that retries natively (xlocal's runner, a Slurm requeue) keeps the job active
between attempts and reports FAILED only when its policy is spent; one that cannot (a Vertex
CustomJob, the fake backend) reports each failed attempt with its class. A poll that reads
such a failure checks the job's policy (``xcore.model.retry``) and records the job PENDING
with a message that starts with ``RETRY_PENDING`` instead of FAILED, so the unit reads
active; ``xcore.runtime.resubmit.relaunch_pending``, one of the observers' duties (``xcore.runtime.observers``),
then resubmits it, exactly once across observers: the attempt is claimed by a
compare-and-set in the store (``MetadataStore.begin_attempts``) under a launcher lease, so
an observer killed between claiming and recording the submission is resolved like any
launcher (adopted, or failed to launch) and never submits twice.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from xcore.model.retry import DEFAULT_RETRY, Retry
from xcore.model.status import JobState, Status

if TYPE_CHECKING:
    from xcore.store import MetadataStore
    from xcore.store.records import JobRecord

RETRY_PENDING = "retry pending"


def is_pending(job: JobRecord) -> bool:
    """A job whose failed attempt waits to be relaunched by an observer."""
    return job.status is Status.PENDING and job.message.startswith(RETRY_PENDING)


def policy_of(stored: object) -> Retry:
    """The policy an executor was stored with (its ``retry`` field); the default if none or unreadable."""
    try:
        return Retry.from_json(stored) or DEFAULT_RETRY
    except (TypeError, ValueError, AttributeError):
        return DEFAULT_RETRY


def pending(store: MetadataStore, reached: Sequence[tuple[JobRecord, JobState]]
            ) -> list[tuple[JobRecord, JobState]]:
    """``reached`` with each FAILED state whose policy retries it turned into a retry pending
    (PENDING, the failure kept). Asks the store for the policies of the failed jobs only."""
    policies = store.retry_policies([job.id for job, state in reached if state.status is Status.FAILED])
    if not policies:
        return list(reached)
    # A unit `xcore cancel` named is not retried: it ends as its backend says.
    cancels = {e: store.cancel_requested(e) for e in {job.experiment_id for job, _ in reached if job.id in policies}}
    out = []
    for job, state in reached:
        if state.status is Status.FAILED and job.id in policies and not cancels[job.experiment_id].covers(
                job.work_unit_id):
            _, stored = policies[job.id]
            # The attempt whose handle was read, not the store's: another observer may have
            # relaunched the job since, and attempt 1's failure must not spend attempt 2's policy.
            attempt = state.attempt or job.attempt
            policy = policy_of(stored)
            failure = state.failure or "error"
            if policy.retries(failure, state.exit_code, attempt):
                state = JobState(Status.PENDING, f"{RETRY_PENDING}: attempt {attempt} of {policy.max_attempts} "
                                 f"failed ({failure}): {state.message}", state.exit_code, state.started_at, None,
                                 failure, state.attempt, state.previous_attempts)
        out.append((job, state))
    return out


def backoff_over(store: MetadataStore, job: JobRecord) -> bool:
    """Whether the policy's wait before the job's next attempt has passed."""
    policy = policy_of(job.executor.get("retry") if isinstance(job.executor, dict) else None)
    wait = policy.backoff(job.attempt)
    if not wait:
        return True
    history = store.job_history(job.id)
    since = next((e.at for e in reversed(history) if e.message.startswith(RETRY_PENDING)), None)
    return since is None or time.time() - since >= wait
