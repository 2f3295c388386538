"""Resolves the work of launchers that died before recording everything they submitted.

A launcher holds a lease in the store (see ``xcore.runtime.launcher``). Any later command calls
``resolve_orphans``; a lease whose holder is gone (on this host: its pid no longer names the
same process; elsewhere: no heartbeat for ``XCORE_LEASE_SECS``) is claimed by exactly one
process, which then:

- asks the backend (``xcore_adopt``) which of the jobs being submitted reached it, and records
  their handles, so they are tracked, cancellable and have logs like any other job;
- marks every other job of the lease FAILED, "failed to launch", with the reason; an
  identity relaunch (``xm.get_experiment(id).add(job, identity=...)``) runs those again.
"""

from __future__ import annotations

import os
import sys
import time

from xcore import paths
from xcore.errors import StoreFullError
from xcore.hooks.host import PluginHost
from xcore.model.execution import LaunchContext, LaunchRequest
from xcore.model.status import JobState, Status
from xcore.progress import Progress
from xcore.runtime.launcher import hostname, lease_secs, process_start_time
from xcore.store import MetadataStore
from xcore.store.records import JobRecord, LeaseRecord


def expired(lease: LeaseRecord, now: float | None = None) -> bool:
    if lease.host == hostname():
        started = process_start_time(lease.pid)
        return started is None or (lease.proc_start is not None and started >= 0
                                   and abs(started - lease.proc_start) > 1.0)
    return (now or time.time()) - lease.heartbeat > lease_secs()


def resolve_orphans(store: MetadataStore, host: PluginHost, *, quiet: bool = False) -> list[dict[str, int]]:
    """Resolve every expired lease once; return what each resolution did."""
    try:
        leases = store.leases()
    except Exception:  # an old or unusual store: nothing to resolve
        return []
    done = []
    for lease in leases:
        if not expired(lease):
            continue
        pid = os.getpid()
        try:
            if not store.claim_lease(lease, hostname(), pid, process_start_time(pid)):
                continue  # another process got there first
            summary = _resolve(store, host, lease)
        except StoreFullError as exc:  # a read must still work: a later command resolves it
            print(f"xcore: warning: the work of a stopped launcher (experiment {lease.experiment_id}) "
                  f"is not settled yet: {exc}", file=sys.stderr)
            break
        done.append(summary)
        if not quiet:
            print(f"xcore: the launcher of experiment {lease.experiment_id} (pid {lease.pid} on {lease.host}) "
                  f"stopped before recording its work: {summary['adopted']} jobs adopted, "
                  f"{summary['failed']} marked failed to launch.", file=sys.stderr)
    return done


def _resolve(store: MetadataStore, host: PluginHost, lease: LeaseRecord) -> dict[str, int]:
    in_flight, queued = store.lease_orphans(lease.id)
    who = f"the launcher (pid {lease.pid} on {lease.host}) stopped"
    launched: list[tuple[int, str, dict, str | None]] = []
    failed: list[tuple[int, JobState]] = [
        (job.id, JobState(Status.FAILED, f"failed to launch: {who} before submitting it")) for job in queued
    ]
    serializer = host.serializer
    for kind, jobs in in_flight:
        handles = _adopt(host, kind, jobs)
        for job, handle in zip(jobs, handles or [None] * len(jobs), strict=True):
            if handle is not None:
                launched.append((job.id, serializer.registry.kind_of(handle), serializer.dump(handle),
                                 getattr(handle, "log_path", None)))
            elif handles is None:
                failed.append((job.id, JobState(Status.FAILED, f"{who} while submitting it to {kind}, which "
                                                "cannot tell whether it arrived: check the backend")))
            else:
                failed.append((job.id, JobState(Status.FAILED, f"failed to launch: {who} before it reached {kind}")))
    # An expired lease was never closed, so the launch never finished, even with nothing to fail
    # (a launcher killed before its first add was recorded): the experiment is failed to launch.
    error = f"{who} before recording every submission" if failed else f"{who} before finishing the launch"
    store.resolve_lease(lease.id, launched, failed, error)
    return {"lease": lease.id, "experiment": lease.experiment_id, "adopted": len(launched), "failed": len(failed)}


def _adopt(host: PluginHost, kind: str, jobs: list[JobRecord]) -> list | None:
    try:
        serializer = host.serializer
        requests = [
            LaunchRequest(job.id, job.experiment_id, job.work_unit_id, job.name, serializer.load(job.executable),
                          serializer.load(job.executor), list(job.args), dict(job.env), attempt=job.attempt)
            for job in jobs
        ]
        owner = host.kinds.owner(kind)
        return host.adopt(kind, requests, LaunchContext(paths.plugin_state_dir(owner), Progress()))
    except Exception as exc:  # plugin missing or failing: treat as "cannot tell"
        print(f"xcore: could not ask {kind} what a stopped launcher submitted: {exc}", file=sys.stderr)
        return None
