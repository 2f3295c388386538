"""xgcp's backend (``VertexBackend``): package container images, launch CustomJobs, status, cancel
and logs."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from xcore import plugin as xp
from xgcp.executors import Vertex, VertexExecutable, VertexHandle, VertexSpec, console_url

XCORE_PLUGIN_API = "1.1"

STORE_FILE = "store-id"
# aiplatform_v1.JobState values (stable wire numbers), so this module needs no Google import.
QUEUED, PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLING, CANCELLED, PAUSED, EXPIRED, UPDATING, PARTIAL = range(1, 12)


def store_id(state_dir: Any) -> str:
    """A random id for this xcore store, put on every CustomJob as the xcore_store label, so two
    stores that share a project never read each other's experiments."""
    import secrets
    from pathlib import Path

    path = Path(state_dir) / STORE_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        xp.private_dir(path.parent)
        xp.atomic_write(path, secrets.token_hex(6))
        return path.read_text().strip()


def _timestamp(value: Any) -> float | None:
    if not value:
        return None
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return None


#: Why a CustomJob waits, in Vertex's own terms (its JobState documentation).
_PENDING_WHY = {QUEUED: "pending: queued on Vertex (not processed yet)",
                PENDING: "pending: Vertex is provisioning its machines",
                PAUSED: "pending: paused on Vertex"}


def job_state(job: Any, handle: VertexHandle) -> xp.JobState:
    """A Vertex CustomJob's state, as the xcore state of the job in pool ``handle.pool``."""
    from xgcp.api import EXIT_RE

    state = int(job.state)
    started, ended = _timestamp(job.start_time), _timestamp(job.end_time)
    if state in (QUEUED, PENDING, PAUSED):
        return xp.JobState(xp.Status.PENDING, _PENDING_WHY.get(state, "queued on Vertex"), started_at=started)
    if state in (RUNNING, UPDATING):
        return xp.JobState(xp.Status.RUNNING, "running on Vertex", started_at=started)
    if state == CANCELLING:
        return xp.JobState(xp.Status.RUNNING, "cancelling on Vertex", started_at=started)
    if state == SUCCEEDED:
        return xp.exit_state(0, started_at=started, ended_at=ended)
    if state == CANCELLED:
        return xp.JobState(xp.Status.CANCELLED, "cancelled", started_at=started, ended_at=ended)
    text = job.error.message if job.error and job.error.message else ""
    code = int(job.error.code or 0) if job.error else 0
    match = EXIT_RE.search(text)
    if state == FAILED and match and int(match.group(2)) == handle.pool:
        final = xp.exit_state(xp.normalize_exit_code(int(match.group(3))), started_at=started, ended_at=ended)
        return attrs.evolve(final, failure=failure_class(state, code, text)) if final.failure else final
    what = {FAILED: "failed", EXPIRED: "expired", PARTIAL: "partially succeeded"}.get(state, f"state {state}")
    return xp.JobState(xp.Status.FAILED, f"Vertex: {what}" + (f": {text}" if text else ""),
                       started_at=started, ended_at=ended, failure=failure_class(state, code, text))


def failure_class(state: int, code: int, text: str) -> str:
    """The failure class of a failed CustomJob (``docs/long-runs.md``), from its state, its
    error's gRPC code and message: Vertex cannot rerun a job, so the core relaunches one
    whose policy retries its class (a spot VM reclaimed reads ``preempted``)."""
    low = text.lower()
    if "preempt" in low:
        return "preempted"
    if "out-of-memory" in low or "out of memory" in low or "oomkilled" in low:
        return "out_of_memory"
    if state == EXPIRED or code == 4 or "deadline" in low or "timed out" in low or "timeout" in low:
        return "timeout"
    if code == 14 or "maintenance" in low or "host error" in low or "node failure" in low:
        return "node_failure"
    if "insufficient" in low or "stockout" in low or "quota" in low:
        return "launch"  # never ran for want of capacity: not the program's failure, not retried by default
    return "error"


def _label_filter(handles: Sequence[VertexHandle]) -> str:
    pairs = sorted({(h.store, h.experiment) for h in handles})
    terms = [f'(labels.xcore_store="{s}" AND labels.xcore_experiment="{e}")' for s, e in pairs]
    return " OR ".join(terms)


def fetch_jobs(handles: Sequence[VertexHandle]) -> dict[str, Any]:
    """Every CustomJob the handles name, with one list call per project and location."""
    from xgcp import api

    places: dict[tuple[str, str], list[VertexHandle]] = {}
    for handle in handles:
        places.setdefault((handle.project, handle.location), []).append(handle)
    found: dict[str, Any] = {}
    for (project, location), group in places.items():
        try:
            found.update(api.list_jobs(api.client(location), project, location, _label_filter(group)))
        except xp.XcoreError:
            raise
        except Exception as exc:  # noqa: BLE001  (any Google error: the jobs read UNKNOWN with the reason)
            raise api.VertexError(f"cannot ask Vertex: {api.explain(exc, project)}") from None
    return found


def _get_missing(handles: Sequence[VertexHandle], found: dict[str, Any]) -> None:
    """Ask for each job the list did not return, by name, before calling it lost: a list can
    lag a create. Only forgotten jobs cost a call."""
    from xgcp import api

    errors = api._errors()
    for handle in handles:
        if handle.name in found:
            continue
        try:
            found[handle.name] = api.client(handle.location).get_custom_job(name=handle.name)
        except errors.NotFound:
            found[handle.name] = None
        except Exception as exc:  # noqa: BLE001  (any Google error: the jobs read UNKNOWN with the reason)
            raise api.VertexError(f"cannot ask Vertex: {api.explain(exc, handle.project)}") from None


class VertexBackend(xp.Backend):
    """Vertex AI CustomJobs: images built and pushed, sweeps created concurrently, status by label."""

    kinds = (Vertex, VertexSpec, VertexExecutable, VertexHandle)  # TensorboardCapability: a typed field

    def package(self, packageable: xp.Packageable, context: xp.PackagingContext) -> VertexExecutable | None:
        spec = packageable.executable_spec
        if isinstance(spec, xp.Container):
            return VertexExecutable(name=spec.name, image_uri=spec.image_path)
        if isinstance(spec, (xp.PythonContainer, xp.Dockerfile)):
            from xgcp import packaging

            return packaging.build_and_push(packageable, spec, context)
        raise xp.PackagingError(
            f"xgcp cannot run {type(spec).__name__}: use xm.container(xgcp.Vertex.Spec(), "
            "'REGION-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG'), xm.python_container(...) or "
            "xm.dockerfile_container(...).")

    def launch(self, requests: Sequence[xp.LaunchRequest],
               context: xp.LaunchContext) -> list[VertexHandle | xp.LaunchFailure]:
        import concurrent.futures

        from xgcp import api, build, config

        store = store_id(context.state_dir)
        planned = build.plan(requests, store, context.experiment_title, config.resolve)
        results: dict[int, VertexHandle | xp.LaunchFailure] = {}
        jobs = [p for p in planned if isinstance(p, build.PlannedJob)]
        for item in planned:
            if not isinstance(item, build.PlannedJob):
                unit, reason = item
                for request in unit:
                    results[request.job_id] = xp.LaunchFailure(reason)
        parallel = min((r.executor.create_parallelism for r in requests), default=8)  # type: ignore[attr-defined]
        done = 0

        def submit(job: build.PlannedJob) -> Any:
            return api.create(api.client(job.location, job.target), job.project, job.location, job.body, job.request_id)

        with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
            futures = {pool.submit(submit, job): job for job in jobs}
            for future in concurrent.futures.as_completed(futures):
                job = futures[future]
                try:
                    created = future.result()
                except Exception as exc:  # noqa: BLE001  (each unit fails alone; the others stay recorded)
                    reason = api.explain(exc, job.project)
                    for request, _ in job.requests:
                        results[request.job_id] = xp.LaunchFailure(reason)
                else:
                    job_id = created.name.rsplit("/", 1)[-1]
                    for request, pool_index in job.requests:
                        results[request.job_id] = VertexHandle(
                            job.project, job.location, created.name, pool_index, job.request_id, store,
                            str(request.experiment_id), log_path=console_url(job.project, job.location, job_id))
                done += 1
                context.progress.update("vertex: creating custom jobs", done, len(jobs))
        return [results[r.job_id] for r in requests]

    def states(self, handles: Sequence[VertexHandle]) -> list[xp.JobState]:
        found = fetch_jobs(handles)
        _get_missing(handles, found)
        states = []
        for handle in handles:
            job = found.get(handle.name)
            states.append(xp.lost_state(f"Vertex has no CustomJob {handle.name} (deleted?)") if job is None
                          else job_state(job, handle))
        return states

    def cancel(self, handles: Sequence[VertexHandle]) -> None:
        """Ask Vertex to cancel each CustomJob once (a JobGroup's jobs share one), 8 at a time.
        Vertex answers 400 FAILED_PRECONDITION for an ended job: it is left as it is."""
        import concurrent.futures

        from xgcp import api

        errors = api._errors()

        def cancel_one(handle: VertexHandle) -> str | None:
            try:
                api.client(handle.location).cancel_custom_job(name=handle.name)
            except (errors.FailedPrecondition, errors.NotFound, errors.BadRequest):
                return None  # already ended, or forgotten
            except Exception as exc:  # noqa: BLE001  (reported below, after the other cancels were sent)
                return f"cannot cancel {handle.name}: {api.explain(exc, handle.project)}"
            return None

        unique = list({h.name: h for h in handles}.values())
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            problems = [p for p in pool.map(cancel_one, unique) if p]
        if problems:
            raise api.VertexError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))

    def shell(self, handle: VertexHandle, command: list[str] | None) -> xp.ShellCommand | None:
        """Vertex gives no terminal to a client: the job's web shell (``enable_web_access``) is
        the way in, so its address is the answer, as an error that names it."""
        found = fetch_jobs([handle])
        _get_missing([handle], found)
        job = found.get(handle.name)
        uris = dict(job.web_access_uris) if job is not None else {}
        uri = uris.get(f"workerpool{handle.pool}-0") or next(iter(uris.values()), None)
        if uri:
            raise xp.XcoreError(f"Vertex jobs take no terminal from xcore: open the job's web shell in a browser, "
                                f"{uri}" + (" and run your command there." if command else "."))
        raise xp.XcoreError("Vertex: this job has no web shell; launch with xgcp.Vertex(enable_web_access=True) to "
                            "get one (Vertex offers no other way into a running job).")

    def env(self, handle: VertexHandle) -> dict[str, str] | None:
        """The job's own environment as its CustomJob's container spec keeps it (for a relaunch
        or ``xcore retry``: the store keeps secrets redacted); None once Vertex forgot the job."""
        from xgcp import api

        try:
            job = api.client(handle.location).get_custom_job(name=handle.name)
        except api._errors().NotFound:
            return None
        except Exception as exc:  # noqa: BLE001  (any Google error: the caller refuses to rerun, saying why)
            raise api.VertexError(f"cannot ask Vertex: {api.explain(exc, handle.project)}") from None
        pools = job.job_spec.worker_pool_specs
        if handle.pool >= len(pools):
            return None
        from xgcp.build import unliteral

        own = (xp.ATTEMPT_VAR, xp.CHECKPOINT_VAR)  # xcore's, set anew for each attempt
        return {e.name: unliteral(e.value) for e in pools[handle.pool].container_spec.env if e.name not in own}

    def logs(self, handle: VertexHandle, follow: bool) -> Iterator[str]:
        from xgcp import api

        def finished() -> bool:
            return self.states([handle])[0].status.is_terminal

        return api.log_entries(handle.project, handle.job_id, handle.pool, follow=follow, finished=finished)


@xp.hookimpl
def xcore_register_kinds(registry: xp.KindRegistrar) -> None:
    registry.add_backend(VertexBackend())


@xp.hookimpl
def xcore_add_commands(subparsers: Any) -> None:
    from xgcp import cli

    cli.add_commands(subparsers)
