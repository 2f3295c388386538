"""xk8s's backend (``KubernetesBackend``): package, launch, status, cancel and logs on Kubernetes.

Shapes: work units with one job each, sharing an executable and executor, become ONE
Indexed Job (per-trial argv/env in a ConfigMap); a work unit with several jobs (a
JobGroup) becomes one JobSet; a single job becomes an Indexed Job of one trial with its
argv inline. Status is one LIST of Jobs and one of Pods per namespace, whatever the number
of trials.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import time
import typing
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from xcore import plugin as xp
from xk8s import manifests as mf
from xk8s import states, targets
from xk8s.executables import Image, KubernetesExecutable
from xk8s.executors import Kubernetes, KubernetesSpec
from xk8s.handles import KubernetesHandle

XCORE_PLUGIN_API = "1.1"


# -- package ------------------------------------------------------------------------------


def _registry(executor_spec: Any) -> str:
    target = targets.get(getattr(executor_spec, "target", None))
    registry = getattr(executor_spec, "registry", None) or target.registry or os.environ.get("XK8S_REGISTRY")
    push_tag = getattr(executor_spec, "push_image_tag", None)
    if not registry and push_tag:
        from xcore import images

        registry = images.registry_of(push_tag)  # XManager pushes to push_image_tag alone
    if not registry:
        raise xp.PackagingError("xk8s: building an image needs a registry to push to: set registry in the "
                                "target (k8s.toml), xk8s.Kubernetes.Spec(registry=...) or XK8S_REGISTRY.")
    return registry


def _build(packageable: xp.Packageable, spec: Any, context: xp.PackagingContext) -> KubernetesExecutable:
    """Build with the core's image builder and push to the target's registry, tagged by content:
    an unchanged project is neither rebuilt nor pushed again."""
    from xcore import images

    project = Path(spec.path).expanduser().resolve()
    if not project.is_dir():
        raise xp.PackagingError(f"xk8s: {project} is not a directory; fix path= of the container spec.")
    if isinstance(spec, xp.PythonContainer):
        if not isinstance(spec.entrypoint, xp.ModuleName):
            raise xp.PackagingError("xk8s: xm.python_container with a CommandList is not supported (its commands "
                                    "would need a shell); use xm.ModuleName(...).")
    executor_spec = packageable.executor_spec
    registry = _registry(executor_spec)  # before any work: a missing setting is the first thing said
    build_context = images.context_for(spec)
    published = images.publish(None, build_context, registry,
                               push_tag=getattr(executor_spec, "push_image_tag", None), progress=context.progress,
                               cache_dir=context.cache_dir / "images")
    command = list(build_context.entrypoint) if build_context.entrypoint is not None else []
    return KubernetesExecutable(name=spec.name, image=published.reference, command=command)


# -- launch -------------------------------------------------------------------------------


def _name(request: xp.LaunchRequest, token: str, chunk: int | None = None) -> str:
    suffix = f"-{chunk}" if chunk else ""
    return f"xc-e{request.experiment_id}-u{request.work_unit_id}-{token}{suffix}"


def _exe(request: xp.LaunchRequest) -> KubernetesExecutable:
    return typing.cast(KubernetesExecutable, request.executable)


def _argv(request: xp.LaunchRequest) -> list[str]:
    exe = typing.cast(KubernetesExecutable, request.executable)
    return [*exe.command, *request.args]


def _retry(request: xp.LaunchRequest) -> xp.Retry | None:
    """The job's resolved policy (the core resolves it; a request built by hand may carry only
    its executor's)."""
    return request.retry or typing.cast(Kubernetes, request.executor).retry


def _env(request: xp.LaunchRequest) -> dict[str, str]:
    """The job's env, plus ``XCORE_CHECKPOINT_DIR`` on the executor's checkpoint volume."""
    executor = typing.cast(Kubernetes, request.executor)
    if executor.checkpoint_volume is None:
        return dict(request.env)
    mount = next(v.mount_path for v in executor.volumes if v.name == executor.checkpoint_volume)
    return {**request.env,
            xp.CHECKPOINT_VAR: xp.checkpoint_dir(mount, request.experiment_id, request.work_unit_id)}


def _labels(request: xp.LaunchRequest, token: str) -> dict[str, str]:
    return {mf.LABEL_LAUNCH: token, mf.LABEL_EXPERIMENT: str(request.experiment_id)}


def _owner(job: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    meta = job["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"],
            "controller": False, "blockOwnerDeletion": False}


def _submit_job(ctx: str | None, namespace: str, job: dict[str, Any], configmap: dict[str, Any] | None) -> None:
    """Create the Job, then its ConfigMap owned by it (deleted with it); pods wait for the volume."""
    from xk8s import client

    client.count("create_job")
    created = json.loads(client.batch(ctx).create_namespaced_job(namespace, job, _preload_content=False).data)
    if configmap is None:
        return
    configmap["metadata"]["ownerReferences"] = [_owner(created, mf.API_JOB, "Job")]
    try:
        client.count("create_configmap")
        client.core(ctx).create_namespaced_config_map(namespace, configmap, _preload_content=False)
    except Exception:
        client.count("delete_job")
        client.batch(ctx).delete_namespaced_job(job["metadata"]["name"], namespace,
                                                propagation_policy="Background", _preload_content=False)
        raise


def _role(job_name: str) -> str:
    """A JobGroup key as a JobSet replicated-job name (a DNS label; ``_`` becomes ``-``)."""
    role = job_name.lower().replace("_", "-")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?", role):
        raise xp.ConfigurationError(f"xk8s: JobGroup key {job_name!r} cannot name a JobSet role; use letters, "
                                    "digits, '-' or '_', at most 40 characters.")
    return role


def _plan(requests: Sequence[xp.LaunchRequest]) -> list[list[int]]:
    """Groups of request positions: a JobGroup's jobs together; single jobs by executable+executor."""
    by_unit: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, r in enumerate(requests):
        by_unit[(r.experiment_id, r.work_unit_id)].append(i)
    groups: list[list[int]] = []
    sweeps: dict[tuple[Any, ...], list[int]] = {}
    for positions in by_unit.values():
        if len(positions) > 1:
            groups.append(positions)
            continue
        r = requests[positions[0]]
        executor = typing.cast(Kubernetes, r.executor)
        if executor.distributed is not None or executor.requirements.replicas > 1:  # a JobSet of one role
            groups.append(positions)
            continue
        exe = typing.cast(KubernetesExecutable, r.executable)
        key = (r.experiment_id, typing.cast(Kubernetes, r.executor).group_key(), exe.image, tuple(exe.command),
               _retry(r))
        if not exe.command:  # the image's own entrypoint: argv cannot be data, one Job each
            groups.append(positions)
        elif key in sweeps:
            sweeps[key].extend(positions)
        else:
            sweeps[key] = list(positions)
            groups.append(sweeps[key])
    return groups


# -- status -------------------------------------------------------------------------------


def _by_namespace(handles: Sequence[KubernetesHandle]) -> dict[tuple[str | None, str], list[int]]:
    groups: dict[tuple[str | None, str], list[int]] = defaultdict(list)
    for i, h in enumerate(handles):
        groups[(h.context, h.namespace)].append(i)
    return groups


def _selector(handles: Sequence[KubernetesHandle]) -> str:
    launches = sorted({h.launch for h in handles})
    return f"{mf.LABEL_LAUNCH} in ({','.join(launches)})"


def snapshot(context: str | None, namespace: str, handles: Sequence[KubernetesHandle]) -> states.Snapshot:
    """Jobs and Pods of these handles' launches: one LIST each."""
    from xk8s import client

    selector = _selector(handles)
    jobs = client.raw_list(client.batch(context).list_namespaced_job, namespace, selector, "list_jobs")
    pods = client.raw_list(client.core(context).list_namespaced_pod, namespace, selector, "list_pods")
    return states.Snapshot.of(jobs, pods)


KUEUE_VERSIONS = ("v1beta1", "v1beta2")  # v1beta1 is served by every Kueue release so far


def add_workloads(context: str | None, namespace: str, snap: states.Snapshot) -> None:
    """The Kueue Workloads of Jobs that wait for admission, for the reason (one more LIST, only then)."""
    from xk8s import client

    uids = sorted({states.workload_owner(j) for j in snap.jobs.values() if states.waits_for_kueue(j)})
    if not uids:
        return
    selector = f"kueue.x-k8s.io/job-uid in ({','.join(uids)})"
    for version in KUEUE_VERSIONS:
        client.count("list_workloads")
        try:
            response = client.custom(context).list_namespaced_custom_object(
                "kueue.x-k8s.io", version, namespace, "workloads", label_selector=selector, _preload_content=False)
        except client.api_exception() as exc:
            if exc.status == 404:  # this version is not served (or Kueue is not installed)
                continue
            if exc.status == 403:
                snap.workloads_error = (f"not allowed to list Kueue Workloads in {namespace} for the reason "
                                        "(grant list on workloads.kueue.x-k8s.io)")
                return
            raise
        for item in json.loads(response.data).get("items") or []:
            uid = (item["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid")
            if uid:
                snap.workloads[uid] = item
        return


def _marker_dir(context: str | None, namespace: str) -> Path:
    return xp.plugin_state_dir("xk8s") / "cancelled" / (context or "_") / namespace


def cancel_marker(handle: KubernetesHandle) -> Path:
    """Written by ``xcore cancel`` before it deletes anything: a deleted Job reads CANCELLED."""
    return _marker_dir(handle.context, handle.namespace) / f"{handle.job_name}.{handle.index}"


def _keep_final_states(context: str | None, namespace: str, name: str, snap: states.Snapshot, completions: int,
                       open_indexes: set[int]) -> None:
    """Before a Job is deleted, record how its ended trials ended: they read so afterwards."""
    final = {}
    for index in range(completions):
        if index not in open_indexes:
            s = states.state_of(snap, name, index)
            final[str(index)] = [s.status.name, s.message, s.exit_code, s.started_at, s.ended_at, s.failure,
                                s.attempt]
    if final:
        xp.atomic_write(xp.private_dir(_marker_dir(context, namespace)) / f"{name}.final.json", json.dumps(final))


def _final_states(context: str | None, namespace: str, name: str, cache: dict[str, dict]) -> dict:
    if name not in cache:
        try:
            cache[name] = json.loads((_marker_dir(context, namespace) / f"{name}.final.json").read_text())
        except (FileNotFoundError, ValueError):
            cache[name] = {}
    return cache[name]


def _locally_cancelled(context: str | None, namespace: str) -> set[str]:
    try:
        return set(os.listdir(_marker_dir(context, namespace)))
    except FileNotFoundError:
        return set()


def _jobsets_without_jobs(context: str | None, namespace: str, handles: Sequence[KubernetesHandle],
                          snap: states.Snapshot) -> set[str]:
    """JobSets that exist but whose Jobs are not listed yet (one more LIST, only then)."""
    from xk8s import client

    if not any(h.shape == "jobset" and h.job_name not in snap.jobs for h in handles):
        return set()
    client.count("list_jobsets")
    response = client.custom(context).list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", label_selector=_selector(handles), _preload_content=False)
    return {item["metadata"]["name"] for item in json.loads(response.data).get("items") or []}


def _role_state(snap: states.Snapshot, handle: KubernetesHandle, cancelled: bool) -> xp.JobState:
    """A JobSet role with N replicas (multi-slice): failed if one failed, done when all are."""
    prefix = f"{handle.name}-{handle.role}-"
    replicas = sorted(n for n in snap.jobs if n.startswith(prefix) and n[len(prefix):].isdigit())
    if len(replicas) <= 1:
        return states.state_of(snap, handle.job_name, 0, locally_cancelled=cancelled, first_attempt=handle.attempt)
    each = [states.state_of(snap, name, 0, locally_cancelled=cancelled, first_attempt=handle.attempt)
            for name in replicas]
    for status in (xp.Status.CANCELLED, xp.Status.FAILED):
        for name, state in zip(replicas, each, strict=True):
            if state.status is status:
                return xp.JobState(status, f"replica {name[len(prefix):]}: {state.message}", state.exit_code,
                                   state.started_at, state.ended_at, failure=state.failure, attempt=state.attempt)
    if all(state.status is xp.Status.COMPLETED for state in each):
        return xp.JobState(xp.Status.COMPLETED, f"{len(each)} replicas: exit code 0", 0,
                           min((x.started_at for x in each if x.started_at), default=None),
                           max((x.ended_at for x in each if x.ended_at), default=None))
    running = sum(state.status is xp.Status.RUNNING for state in each)
    status = xp.Status.RUNNING if running else xp.Status.PENDING
    return xp.JobState(status, f"{running}/{len(each)} replicas running; " + each[0].message)


def _ask(handles: Sequence[KubernetesHandle]) -> list[xp.JobState]:
    from xk8s import client

    out: list[xp.JobState] = [xp.JobState(xp.Status.UNKNOWN, "not asked")] * len(handles)
    for (ctx, namespace), positions in _by_namespace(handles).items():
        group = [handles[i] for i in positions]
        try:
            snap = snapshot(ctx, namespace, group)
        except client.api_exception() as exc:
            raise xp.LaunchError(f"xk8s: cannot list Jobs in {namespace}: {client.describe(exc)}") from None
        except Exception as exc:  # urllib3 connection errors: cannot ask now
            if type(exc).__module__.startswith("urllib3"):
                raise OSError(f"xk8s: the API server does not answer: {exc}") from None
            raise
        add_workloads(ctx, namespace, snap)
        marked = _locally_cancelled(ctx, namespace)  # one directory read, not one per trial
        finals: dict[str, dict] = {}
        sets = _jobsets_without_jobs(ctx, namespace, group, snap)
        for i, h in zip(positions, group, strict=True):
            if h.job_name not in snap.jobs and h.name in sets:
                out[i] = xp.JobState(xp.Status.PENDING, "waiting for the JobSet controller to create the Jobs")
                continue
            if h.job_name not in snap.jobs and f"{h.job_name}.final.json" in marked:
                final = _final_states(ctx, namespace, h.job_name, finals).get(str(h.index))
                if final:
                    out[i] = xp.JobState(xp.Status[final[0]], *final[1:])
                    continue
            cancelled = f"{h.job_name}.{h.index}" in marked
            if h.shape == "jobset":
                out[i] = _role_state(snap, h, cancelled)
                continue
            out[i] = states.state_of(snap, h.job_name, h.index, locally_cancelled=cancelled, first_attempt=h.attempt)
    return out


# -- logs ---------------------------------------------------------------------------------


def _pod_lines(handle: KubernetesHandle, follow: bool) -> Iterator[bytes]:
    from xk8s import client

    ApiException = client.api_exception()
    seen: set[str] = set()
    while True:
        snap = snapshot(handle.context, handle.namespace, [handle])
        pod = snap.latest_pod(handle.job_name, handle.index)
        done = states.state_of(snap, handle.job_name, handle.index,
                               locally_cancelled=xp.cancel_requested(cancel_marker(handle))).status.is_terminal
        if pod is not None and pod["metadata"]["name"] not in seen and states.has_started(pod):
            name = pod["metadata"]["name"]
            seen.add(name)
            if len(seen) > 1:
                yield f"\n[xk8s: retry, pod {name}]\n".encode()
            try:
                client.count("read_log")
                response = client.core(handle.context).read_namespaced_pod_log(
                    name, handle.namespace, container=mf.CONTAINER, follow=follow, _preload_content=False)
                yield from response.stream(8192, decode_content=True)
            except ApiException as exc:
                if exc.status != 404 or not follow:
                    raise xp.LaunchError(f"xk8s: cannot read the log of pod {name}: {client.describe(exc)}") from None
            continue
        if not follow or done:
            return
        time.sleep(0.2)


# -- the backend --------------------------------------------------------------------------


class KubernetesBackend(xp.Backend):
    """Kubernetes jobs: images packaged and pushed, sweeps as Indexed Jobs, JobGroups as JobSets."""

    kinds = (Kubernetes, KubernetesSpec, KubernetesExecutable, KubernetesHandle, Image)

    def package(self, packageable: xp.Packageable, context: xp.PackagingContext) -> KubernetesExecutable | None:
        spec = packageable.executable_spec
        if isinstance(spec, Image):
            return KubernetesExecutable(name=spec.name, image=spec.image, command=list(spec.command))
        if isinstance(spec, xp.Container):
            return KubernetesExecutable(name=spec.name, image=spec.image_path)
        if isinstance(spec, (xp.PythonContainer, xp.Dockerfile)):
            return _build(packageable, spec, context)
        raise xp.PackagingError(
            f"xk8s cannot run {type(spec).__name__}: use xm.container(IMAGE), xk8s.image(IMAGE, command=[...]), "
            "xm.python_container(...) or xm.dockerfile_container(...).")

    def launch(self, requests: Sequence[xp.LaunchRequest],
               context: xp.LaunchContext) -> list[KubernetesHandle | xp.LaunchFailure]:
        from xk8s import client

        results: list[KubernetesHandle | xp.LaunchFailure | None] = [None] * len(requests)
        errors: list[str] = []
        resolved = [targets.resolve(r.executor) for r in requests]
        plan = _plan(requests)
        for group in plan:  # every check that can refuse the batch runs before anything is created
            if len({requests[i].work_unit_id for i in group}) == 1 and len(group) > 1:
                [_role(requests[i].job_name) for i in group]
            else:
                mf.chunk_trials([(_argv(requests[i]), _env(requests[i])) for i in group])
        for group in plan:
            token = secrets.token_hex(4)
            first = requests[group[0]]
            executor, ctx, namespace = resolved[group[0]]
            is_set = len({requests[i].job_name for i in group}) > 1 or (
                len(group) > 1 and first.work_unit_id == requests[group[-1]].work_unit_id) or (
                len(group) == 1 and (executor.distributed is not None or executor.requirements.replicas > 1))
            try:
                if is_set:
                    name = _name(first, token)
                    roles = [(_role(requests[i].job_name), resolved[i][0], _exe(requests[i]).image,
                              _argv(requests[i]), _env(requests[i])) for i in group]
                    manifest = mf.jobset(name, namespace, roles, _labels(first, token),
                                         has_command=[bool(_exe(requests[i]).command) for i in group],
                                         retry=_retry(first), attempt=first.attempt)
                    client.count("create_jobset")
                    client.custom(ctx).create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace,
                                                                       "jobsets", manifest, _preload_content=False)
                    for i, (role, *_rest) in zip(group, roles, strict=True):
                        results[i] = KubernetesHandle(
                            ctx, namespace, name, 0, token, "jobset", role, requests[i].attempt,
                            log_path=f"k8s://{ctx or ''}/{namespace}/jobset/{name}/{role}")
                    continue
                trials = [(_argv(requests[i]), _env(requests[i])) for i in group]
                has_command = bool(_exe(first).command)
                for chunk_no, chunk in enumerate(mf.chunk_trials(trials)):
                    name = _name(first, token, chunk_no)
                    inline = len(chunk) == 1
                    job, configmap = mf.indexed_job(name, namespace, executor, _exe(first).image,
                                                    _labels(first, token), trials=[trials[c] for c in chunk],
                                                    inline=inline, has_command=has_command, retry=_retry(first),
                                                    attempts=[requests[group[c]].attempt for c in chunk])
                    try:
                        _submit_job(ctx, namespace, job, configmap)
                    except Exception as exc:
                        if not isinstance(exc, (client.api_exception(), xp.XcoreError, OSError)):
                            raise
                        reason = f"creating Job {name} in namespace {namespace}: {client.describe(exc)}"
                        errors.append(reason)
                        for c in chunk:
                            results[group[c]] = xp.LaunchFailure(reason)
                        continue
                    for index, c in enumerate(chunk):
                        results[group[c]] = KubernetesHandle(
                            ctx, namespace, name, index, token, "job", attempt=requests[group[c]].attempt,
                            log_path=f"k8s://{ctx or ''}/{namespace}/job/{name}/{index}")
            except xp.ConfigurationError:
                raise
            except client.api_exception() as exc:
                reason = f"creating JobSet in namespace {namespace}: {client.describe(exc)}"
                errors.append(reason)
                for i in group:
                    results[i] = xp.LaunchFailure(reason)
        if errors and all(isinstance(r, xp.LaunchFailure) for r in results):
            raise xp.LaunchError(f"xk8s: nothing was submitted: {errors[0]}")
        objects = len({h.name for h in results if isinstance(h, KubernetesHandle)})
        context.progress.message(f"xk8s: submitted {len(requests)} job(s) as {objects} Kubernetes object(s)")
        return results  # type: ignore[return-value]

    def states(self, handles: Sequence[KubernetesHandle]) -> list[xp.JobState]:
        return _ask(handles)

    def cancel(self, handles: Sequence[KubernetesHandle]) -> None:
        """Stop the trials: a whole Job (or JobSet) is deleted with background propagation; some
        indexes of a sweep are marked cancelled (Job annotation, ConfigMap) and their pods deleted."""
        from xk8s import client

        current = _ask(handles)
        live = [h for h, s in zip(handles, current, strict=True) if not s.status.is_terminal]
        by_object: dict[tuple[str | None, str, str], list[KubernetesHandle]] = defaultdict(list)
        for h in live:
            xp.mark_cancelled(cancel_marker(h))  # first: the trial reads CANCELLED from now on
            by_object[(h.context, h.namespace, h.name)].append(h)
        for (ctx, namespace, name), group in by_object.items():
            snap = snapshot(ctx, namespace, group)
            kind = group[0].shape
            ApiException = client.api_exception()
            try:
                if kind == "jobset":
                    client.count("delete_jobset")
                    client.custom(ctx).delete_namespaced_custom_object(
                        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", name,
                        propagation_policy="Background", _preload_content=False)
                    continue
                job = snap.jobs.get(name)
                completions = (job or {}).get("spec", {}).get("completions", 1)
                open_indexes = {i for i in range(completions) if not snap.index_done(name, i)}
                wanted = {h.index for h in group}
                if job is None:
                    continue
                if open_indexes <= wanted:
                    _keep_final_states(ctx, namespace, name, snap, completions, open_indexes)
                    client.count("delete_job")
                    client.batch(ctx).delete_namespaced_job(name, namespace, propagation_policy="Background",
                                                            _preload_content=False)
                    continue
                cancelled = sorted(set(states.cancelled_indexes(job)) | wanted)
                client.count("patch_job")
                client.batch(ctx).patch_namespaced_job(
                    name, namespace, {"metadata": {"annotations": {mf.ANNOTATION_CANCELLED: json.dumps(cancelled)}}},
                    _preload_content=False)
                client.count("patch_configmap")
                client.core(ctx).patch_namespaced_config_map(
                    name, namespace, {"data": {mf.CANCELLED_KEY: json.dumps(cancelled)}}, _preload_content=False)
                for pod in snap.pods_of(name, wanted):
                    client.count("delete_pod")
                    try:
                        client.core(ctx).delete_namespaced_pod(pod["metadata"]["name"], namespace,
                                                               _preload_content=False)
                    except ApiException as exc:
                        if exc.status != 404:
                            raise
            except ApiException as exc:
                if exc.status != 404:  # already gone: nothing left to stop
                    raise xp.LaunchError(f"xk8s: cannot cancel {name} in {namespace}: {client.describe(exc)}") from None

    def logs(self, handle: KubernetesHandle, follow: bool) -> Iterator[str]:
        return xp.decode_chunks(_pod_lines(handle, follow))

    def shell(self, handle: KubernetesHandle, command: list[str] | None) -> xp.ShellCommand:
        """``kubectl exec`` into the trial's latest pod (its main container): kubectl attaches
        the terminal, and reads the same kubeconfig and context."""
        import shutil
        import sys

        pod = snapshot(handle.context, handle.namespace, [handle]).latest_pod(handle.job_name, handle.index)
        if pod is None or not states.has_started(pod):
            raise xp.XcoreError(f"xk8s: trial {handle.index} of {handle.job_name} has no running pod to enter.")
        argv = ["kubectl", *(["--context", handle.context] if handle.context else []), "-n", handle.namespace,
                "exec", "-i", *(["-t"] if sys.stdin.isatty() else []), pod["metadata"]["name"], "-c", mf.CONTAINER,
                "--", *(command or ["sh"])]
        if shutil.which("kubectl") is None:
            raise xp.XcoreError("xk8s: xcore shell runs kubectl, which is not on PATH; install it, or run: "
                                + " ".join(shlex.quote(word) for word in argv))
        return xp.ShellCommand(argv)


@xp.hookimpl
def xcore_register_kinds(registry: xp.KindRegistrar) -> None:
    registry.add_backend(KubernetesBackend())


@xp.hookimpl
def xcore_add_commands(subparsers: Any) -> None:
    from xk8s import cli

    cli.add_commands(subparsers)
