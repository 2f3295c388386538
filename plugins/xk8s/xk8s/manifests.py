"""Manifests as plain dicts: a Job, a sweep as one Indexed Job plus its ConfigMap, a JobSet.

Pure functions (no client, no I/O), so every shape can be validated against the official
schemas in tests. Quantities are strings (the client rejects integers for them).

A sweep's per-trial argv and env are JSON *data* in a ConfigMap mounted into the pod; a
tiny Python entrypoint reads its own trial by ``JOB_COMPLETION_INDEX`` and ``execvpe``s the
argv as is, so no shell ever parses an argument.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from xcore import plugin as xp
from xk8s.executors import Kubernetes, tpu_topology

API_JOB = "batch/v1"
API_JOBSET = "jobset.x-k8s.io/v1alpha2"
CONTAINER = "main"
TRIALS_DIR = "/var/run/xk8s/trials"
#: A trial cancelled before its pod started exits with this code; the pod failure policy
#: turns it into a failed index that is not retried.
CANCELLED_EXIT_CODE = 121
CANCELLED_KEY = "cancelled"
LABEL_LAUNCH = "xcore.io/launch"
LABEL_EXPERIMENT = "xcore.io/experiment"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
ANNOTATION_CANCELLED = "xcore.io/cancelled-indexes"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
#: A ConfigMap holds at most 1 MiB; chunks stay well below it.
CONFIGMAP_BUDGET = 900_000
MAX_TRIALS_PER_JOB = 20_000

ENTRYPOINT = f"""\
import json, os, sys
d, i = sys.argv[1], os.environ["JOB_COMPLETION_INDEX"]
try:
    cancelled = json.load(open(os.path.join(d, "{CANCELLED_KEY}")))
except (OSError, ValueError):
    cancelled = []
if int(i) in cancelled:
    print("xk8s: trial", i, "was cancelled", flush=True)
    sys.exit({CANCELLED_EXIT_CODE})
t = json.load(open(os.path.join(d, i), encoding="utf-8"))
env = dict(os.environ)
env.update(t["env"])
if t["env"].get("XCORE_CHECKPOINT_DIR"):
    os.makedirs(t["env"]["XCORE_CHECKPOINT_DIR"], mode=0o700, exist_ok=True)
if "XCORE_ATTEMPT" in t["env"]:
    env["XCORE_ATTEMPT"] = str(sum(int(env.get(k) or 0) for k in
                                   ("XCORE_ATTEMPT", "XK8S_INDEX_FAILURES", "XK8S_INDEX_IGNORED_FAILURES")))
try:
    os.execvpe(t["argv"][0], t["argv"], env)
except OSError as e:
    print("xk8s: cannot run", repr(t["argv"][0]) + ":", e, file=sys.stderr, flush=True)
    sys.exit(127)
"""

GKE_GPU = {
    "P4": "nvidia-tesla-p4", "T4": "nvidia-tesla-t4", "L4": "nvidia-l4", "P100": "nvidia-tesla-p100",
    "V100": "nvidia-tesla-v100", "A100": "nvidia-tesla-a100", "A100_80GIB": "nvidia-a100-80gb",
    "H100": "nvidia-h100-80gb", "H100_MEGA": "nvidia-h100-mega-80gb", "H200": "nvidia-h200-141gb",
    "B200": "nvidia-b200", "GB200": "nvidia-gb200",
}
GKE_TPU = {
    "TPU_V3": "tpu-v3-slice", "TPU_V4": "tpu-v4-podslice", "TPU_V4_LITE": "tpu-v4-lite-device",
    "TPU_V5E": "tpu-v5-lite-podslice", "TPU_V5P": "tpu-v5p-slice", "TPU_V6E": "tpu-v6e-slice",
    "TPU_V7": "tpu7x", "TPU_V7X": "tpu7x",
}


def _cpu(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{round(value * 1000)}m"


def resources(executor: Kubernetes) -> tuple[dict[str, Any], dict[str, str]]:
    """The container's ``resources`` and the node selector the accelerator needs."""
    req = executor.requirements
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    selector: dict[str, str] = {}
    if req.cpu is not None:
        requests["cpu"] = _cpu(req.cpu)
    if req.memory is not None:
        requests["memory"] = limits["memory"] = str(req.memory)
    storage = req.task_requirements.get(xp.ResourceType.EPHEMERAL_STORAGE)
    if storage is not None:
        requests["ephemeral-storage"] = limits["ephemeral-storage"] = str(int(storage))
    if req.accelerator is not None:
        name, count = req.accelerator.name, str(req.accelerator_count)
        if req.accelerator.is_tpu:
            requests["google.com/tpu"] = limits["google.com/tpu"] = count
            if name not in GKE_TPU:
                raise xp.ConfigurationError(f"xk8s: GKE has no TPU type for {name.lower()}; "
                                            f"use one of {', '.join(t.lower() for t in GKE_TPU)}.")
            selector["cloud.google.com/gke-tpu-accelerator"] = GKE_TPU[name]
            topology = tpu_topology(req)
            if topology:
                selector["cloud.google.com/gke-tpu-topology"] = topology
        else:
            requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = count
            if name in GKE_GPU:
                selector["cloud.google.com/gke-accelerator"] = GKE_GPU[name]
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out, selector


def queue_labels(executor: Kubernetes) -> dict[str, str]:
    labels = {}
    if executor.queue:
        labels["kueue.x-k8s.io/queue-name"] = executor.queue
    if executor.workload_priority:
        labels["kueue.x-k8s.io/priority-class"] = executor.workload_priority
    return labels


def literal(text: str) -> str:
    """``text`` as a word of a container's ``command``/``args`` or an env ``value`` that
    Kubernetes turns back into exactly ``text``: the kubelet replaces ``$(NAME)`` of a variable
    the container defines and ``$$`` by ``$`` (and keeps any other ``$``), so every ``$``
    doubled comes out as one ``$`` and nothing else."""
    return text.replace("$", "$$")


def pod_spec(executor: Kubernetes, image: str, *, command: Sequence[str] | None, args: Sequence[str] | None,
             env: Mapping[str, str], trials_configmap: str | None = None,
             first_env: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The pod template's spec: one container named ``main``.

    Every word of ``command`` and ``args`` and every value of ``env`` reaches the program byte
    for byte (``literal``); ``first_env``: xk8s's own entries, listed first and as they are, whose
    values may refer to the ones before them as ``$(NAME)`` (``distributed_env``)."""
    container: dict[str, Any] = {"name": CONTAINER, "image": image}
    if command:
        container["command"] = [literal(word) for word in command]
    if args:
        container["args"] = [literal(word) for word in args]
    env_list: list[dict[str, Any]] = [*first_env, *({"name": k, "value": literal(v)} for k, v in env.items())]
    env_list += [{"name": var, "valueFrom": {"secretKeyRef": {"name": ref.split("/", 1)[0],
                                                                "key": ref.split("/", 1)[1]}}}
                 for var, ref in executor.env_from_secrets.items()]
    if env_list:
        container["env"] = env_list
    res, accel_selector = resources(executor)
    if res:
        container["resources"] = res
    if executor.image_pull_policy:
        container["imagePullPolicy"] = executor.image_pull_policy
    volumes = [{"name": v.name, **v.source()} for v in executor.volumes]
    mounts = [v.mount() for v in executor.volumes]
    if trials_configmap:
        volumes.append({"name": "xk8s-trials", "configMap": {"name": trials_configmap}})
        mounts.append({"name": "xk8s-trials", "mountPath": TRIALS_DIR, "readOnly": True})
    if mounts:
        container["volumeMounts"] = mounts
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    selector = {**accel_selector, **executor.node_selector}
    if selector:
        spec["nodeSelector"] = selector
    if executor.tolerations:
        spec["tolerations"] = [t.to_manifest() for t in executor.tolerations]
    if volumes:
        spec["volumes"] = volumes
    if executor.service_account:
        spec["serviceAccountName"] = executor.service_account
    if executor.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in executor.image_pull_secrets]
    if executor.priority_class:
        spec["priorityClassName"] = executor.priority_class
    if executor.time_limit_secs:
        # per pod, so per trial of a sweep: the kubelet fails the pod with reason DeadlineExceeded
        spec["activeDeadlineSeconds"] = executor.time_limit_secs
    return spec


_DEFAULT_RETRY = xp.Retry()  # the policy of a job that names none
#: The exit code of a container the kernel's OOM killer (or any SIGKILL) ended.
OOM_EXIT_CODE = 137
#: The pod annotations in which the Job controller counts an index's failed pods (counted
#: against backoffLimitPerIndex, and ignored by the failure policy: disruptions).
FAILURES_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
IGNORED_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"


#: A JobSet's pods: how often the set was restarted (the label JobSet puts on its pods).
RESTARTS_ENV = {"name": "XK8S_JOBSET_RESTARTS",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"}}}


def retry_limit(executor: Kubernetes, retry: xp.Retry | None) -> int:
    """Failed pods an index may have before it fails (``backoffLimitPerIndex``): the policy's
    ``max_attempts - 1``, or the executor's own ``retries`` when set."""
    return executor.retries or (retry or _DEFAULT_RETRY).max_attempts - 1


def failure_policy(executor: Kubernetes | None = None, retry: xp.Retry | None = None, *,
                   fail: str = "FailIndex") -> dict[str, Any]:
    """The pod failure policy of ``retry`` (first matching rule wins):

    - a disruption (preemption, eviction, a lost node: the pod's ``DisruptionTarget``) is
      ignored, retried without counting, when the policy retries ``preempted`` or
      ``node_failure`` (Kubernetes' rule cannot tell them apart), else it fails the index;
    - a cancelled trial fails its index;
    - exit codes the policy retries count against ``backoffLimitPerIndex``: every one when it
      retries ``error`` (or the executor sets ``retries``), else its ``exit_codes`` (and 137
      when it retries ``out_of_memory``); any other exit fails the index at once.

    ``fail``: the action that fails, ``FailJob`` in a JobSet (whose ``FailJobSet`` rule then
    stops the whole set instead of restarting it).
    """
    retry = retry or _DEFAULT_RETRY
    disruption = "Ignore" if retry.max_attempts > 1 and {"preempted", "node_failure"} & set(retry.on) else fail
    rules: list[dict[str, Any]] = [
        {"action": disruption, "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": fail,
         "onExitCodes": {"containerName": CONTAINER, "operator": "In", "values": [CANCELLED_EXIT_CODE]}},
    ]
    if not (executor is not None and executor.retries) and "error" not in retry.on:
        counted = {*retry.exit_codes, *([OOM_EXIT_CODE] if "out_of_memory" in retry.on else [])}
        rules.append({"action": fail, "onExitCodes": {"containerName": CONTAINER, "operator": "NotIn",
                                                             "values": sorted({0, *counted})}})
    return {"rules": rules}


def attempt_env(first: int | None) -> list[dict[str, Any]]:
    """The variables from which a trial's attempt is computed: the index's failed pods the Job
    controller counted and ignored (pod annotations, through the downward API; empty on a pod
    that replaced none), and the submission's attempt ``first`` (None: in each trial's record)."""
    head = [] if first is None else [{"name": "XK8S_FIRST_ATTEMPT", "value": str(first)}]
    return [*head, *({"name": var, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{key}']"}}}
              for var, key in (("XK8S_INDEX_FAILURES", FAILURES_ANNOTATION),
                               ("XK8S_INDEX_IGNORED_FAILURES", IGNORED_ANNOTATION)))]


#: ``XCORE_ATTEMPT`` for a program started as the container's command: a constant POSIX
#: shell text (no user value is ever in it; the argv follows as ``"$@"``) that checks that
#: every part is a plain decimal number, adds them up, exports the sum and ``exec``s the
#: program in its place (parts that are not numbers leave ``XCORE_ATTEMPT`` unset, with a line
#: on stderr, rather than stop the program). Like every word of a command, ``pod_spec`` writes
#: it with each ``$`` doubled, which Kubernetes' own ``$(NAME)``/``$$`` expansion undoes exactly.
ATTEMPT_SCRIPT = (
    'case "${XK8S_FIRST_ATTEMPT:-1}/${XK8S_INDEX_FAILURES:-0}/${XK8S_INDEX_IGNORED_FAILURES:-0}/'
    '${XK8S_JOBSET_RESTARTS:-0}" in\n'
    '  *[!0-9/]*|0[0-9]*|*/0[0-9]*) unset XCORE_ATTEMPT\n'
    '    echo "xk8s: XCORE_ATTEMPT not set: its parts are not numbers" >&2 ;;\n'
    '  *) XCORE_ATTEMPT=$(( ${XK8S_FIRST_ATTEMPT:-1} + ${XK8S_INDEX_FAILURES:-0} + '
    '${XK8S_INDEX_IGNORED_FAILURES:-0} + ${XK8S_JOBSET_RESTARTS:-0} )); export XCORE_ATTEMPT ;;\n'
    'esac\n'
    'exec "$@"\n'
)
#: The wrapper's ``$0`` (what ``ps`` shows until the ``exec``).
ATTEMPT_WRAPPER_NAME = "xk8s-attempt"


def attempt_command(argv: Sequence[str]) -> list[str]:
    """``argv`` run with ``XCORE_ATTEMPT`` set: ``/bin/sh -c ATTEMPT_SCRIPT xk8s-attempt ARGV...``.

    Env vars cannot add, and only the pod knows its index's failures (annotations the Job
    controller writes on each new pod). A shell is in nearly every image and costs one
    ``exec``; the argv are its positional parameters, passed as separate words, never parsed,
    so they reach the program byte for byte."""
    return ["/bin/sh", "-c", ATTEMPT_SCRIPT, ATTEMPT_WRAPPER_NAME, *argv]


def program(argv: Sequence[str], *, has_command: bool, first: int, policy: xp.Retry | None, restarts: bool,
            shell: bool) -> tuple[list[str] | None, list[str] | None, list[dict[str, Any]]]:
    """The container's ``command``, ``args`` and attempt variables for a program run inline (a
    single job, a JobSet role); ``first``: the submission's attempt.

    A job that names no ``policy`` (``retry=`` on it or its executor) is as before: the parts
    only, and a shell-less image keeps working. With one, the program gets ``XCORE_ATTEMPT``
    too: a plain value when Kubernetes never starts it again (``restarts`` False: nothing to
    add), else through ``attempt_command`` when the command is known (not an image's own
    entrypoint, ``xm.container``) and the executor allows a shell (``shell``:
    ``attempt_env=True``, the default; False for images without ``/bin/sh``).
    """
    command, args = (list(argv), None) if has_command else (None, list(argv))
    parts = attempt_env(first)
    if policy is None:
        return command, args, parts
    if not restarts:
        return command, args, [*parts, {"name": xp.ATTEMPT_VAR, "value": str(first)}]
    if has_command and shell:
        return attempt_command(argv), None, parts
    return command, args, parts


def named_policy(executor: Kubernetes) -> xp.Retry | None:
    """The policy a job named (``retry=`` on it, which the core puts on its executor, or on the
    executor); None for the default."""
    return executor.retry if isinstance(executor.retry, xp.Retry) else None


def job_spec(executor: Kubernetes, pod: dict[str, Any], labels: Mapping[str, str], *, completions: int,
             suspend: bool, retry: xp.Retry | None = None, in_jobset: bool = False) -> dict[str, Any]:
    """An Indexed Job's spec; ``in_jobset``: a JobSet role's, which does not retry by itself
    (the JobSet restarts the whole set, ``failurePolicy.maxRestarts``)."""
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": completions,
        "parallelism": min(completions, executor.max_parallel or completions),
        "backoffLimitPerIndex": 0 if in_jobset else retry_limit(executor, retry),
        "podFailurePolicy": failure_policy(executor, retry, fail="FailJob" if in_jobset else "FailIndex"),
        "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
    }
    if executor.ttl_after_finished_secs is not None:
        spec["ttlSecondsAfterFinished"] = executor.ttl_after_finished_secs
    if suspend:
        spec["suspend"] = True
    return spec


def trial_record(argv: Sequence[str], env: Mapping[str, str]) -> str:
    return json.dumps({"argv": list(argv), "env": dict(env)}, ensure_ascii=False, separators=(",", ":"))


def indexed_job(name: str, namespace: str, executor: Kubernetes, image: str, labels: Mapping[str, str], *,
                trials: Sequence[tuple[Sequence[str], Mapping[str, str]]], inline: bool,
                has_command: bool = True, retry: xp.Retry | None = None,
                attempts: Sequence[int] | None = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One Job for ``trials`` (argv, env) pairs, and the ConfigMap that carries them (or None).

    ``inline``: every trial has the same argv and env (a single job), so they go straight into
    the container (any image works); otherwise the trials are data for the entrypoint, which
    needs ``python3`` in the image and a full argv (``has_command``).

    ``retry`` maps onto ``backoffLimitPerIndex`` and the pod failure policy; ``attempts``: each
    trial's first attempt (``LaunchRequest.attempt``). A sweep's entrypoint exports
    ``XCORE_ATTEMPT`` as that plus the index's failed pods; a single job's program gets the
    parts (``XK8S_FIRST_ATTEMPT``, ``XK8S_INDEX_FAILURES``, ``XK8S_INDEX_IGNORED_FAILURES``)
    and, when its executor names a policy, ``XCORE_ATTEMPT`` (``program``).
    """
    attempts = list(attempts or [1] * len(trials))
    all_labels = {**executor.labels, **queue_labels(executor), **labels, LABEL_MANAGED: "xcore"}
    configmap = None
    if inline:
        argv, env = trials[0]
        command, args, attempt_vars = program(argv, has_command=has_command, first=attempts[0],
                                              policy=named_policy(executor),
                                              restarts=retry_limit(executor, retry) > 0, shell=executor.attempt_env)
        pod = pod_spec(executor, image, command=command, args=args, env=env, first_env=attempt_vars)
    else:
        if not has_command:
            raise xp.ConfigurationError("xk8s: a sweep needs the program's full command line; package it with "
                                        "xk8s.image(IMAGE, command=[...]) instead of xm.container(IMAGE).")
        pod = pod_spec(executor, image, command=["python3", "-c", ENTRYPOINT, TRIALS_DIR], args=None, env={},
                       trials_configmap=name, first_env=attempt_env(None))
        data = {str(i): trial_record(argv, {**env, xp.ATTEMPT_VAR: str(attempts[i])})
                for i, (argv, env) in enumerate(trials)}
        data[CANCELLED_KEY] = "[]"
        configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": name, "namespace": namespace, "labels": dict(all_labels)},
                     "data": data}
    job = {
        "apiVersion": API_JOB, "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": all_labels,
                     "annotations": {ANNOTATION_CANCELLED: "[]"}},
        "spec": job_spec(executor, pod, all_labels, completions=len(trials), suspend=bool(executor.queue),
                         retry=retry),
    }
    return job, configmap


def chunk_trials(trials: Sequence[tuple[Sequence[str], Mapping[str, str]]], *, budget: int = CONFIGMAP_BUDGET,
                 max_trials: int = MAX_TRIALS_PER_JOB) -> list[list[int]]:
    """Split trial indexes into chunks whose ConfigMap data stays under ``budget`` bytes."""
    chunks: list[list[int]] = [[]]
    size = 0
    for i, (argv, env) in enumerate(trials):
        record = len(trial_record(argv, env).encode()) + 8
        if record > budget:
            raise xp.ConfigurationError(f"xk8s: trial {i}'s arguments and env take {record} bytes; a trial must "
                                        f"fit in {budget} bytes (pass large inputs as files or a volume).")
        if chunks[-1] and (size + record > budget or len(chunks[-1]) >= max_trials):
            chunks.append([])
            size = 0
        chunks[-1].append(i)
        size += record
    return chunks


def jobset(name: str, namespace: str, roles: Sequence[tuple[str, Kubernetes, str, Sequence[str], Mapping[str, str]]],
           labels: Mapping[str, str], *, has_command: Sequence[bool], retry: xp.Retry | None = None,
           attempt: int = 1) -> dict[str, Any]:
    """A JobSet: one replicated Job per role (``roles``: name, executor, image, argv, env).

    ``JobRequirements(replicas=N)`` or ``num_slices=N`` (multi-slice TPU) sets the role's
    replicas. Kueue admits the whole set at once (gang admission) when a queue is given.

    ``retry``: a failure the policy retries restarts the whole set (``failurePolicy.maxRestarts``:
    ``max_attempts - 1``); one it does not fails a role's Job by its pod failure policy
    (reason ``PodFailurePolicy``), and that fails the set.
    """
    first = roles[0][1]
    all_labels = {**first.labels, **queue_labels(first), **labels, LABEL_MANAGED: "xcore"}
    replicated = []
    hosts = {role: role_hosts(name, role, _replicas(executor)) for role, executor, *_ in roles}
    addresses = xp.role_env(hosts) if len(roles) > 1 else {}
    for (role, executor, image, argv, env), known in zip(roles, has_command, strict=True):
        command, args, attempt_vars = program(argv, has_command=known, first=attempt, policy=named_policy(first),
                                              restarts=retry_limit(first, retry) > 0, shell=executor.attempt_env)
        pod = pod_spec(executor, image, command=command, args=args, env={**addresses, **env},
                       first_env=[*distributed_env(executor, hosts[role]), *attempt_vars, RESTARTS_ENV])
        role_labels = {**all_labels, "xcore.io/role": role}
        role_spec = job_spec(executor, pod, role_labels, completions=1, suspend=False, retry=retry, in_jobset=True)
        replicated.append({"name": role, "replicas": _replicas(executor),
                           "template": {"metadata": {"labels": role_labels}, "spec": role_spec}})
    spec: dict[str, Any] = {"replicatedJobs": replicated,
                            "failurePolicy": {"maxRestarts": retry_limit(first, retry), "rules": [
                                {"name": "not-retried", "action": "FailJobSet",
                                 "onJobFailureReasons": ["PodFailurePolicy"]}]}}
    if first.ttl_after_finished_secs is not None:
        spec["ttlSecondsAfterFinished"] = first.ttl_after_finished_secs
    if first.queue:
        spec["suspend"] = True
    return {"apiVersion": API_JOBSET, "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "labels": all_labels,
                         "annotations": {ANNOTATION_CANCELLED: "[]"}},
            "spec": spec}


JOB_INDEX = "jobset.sigs.k8s.io/job-index"  # the annotation JobSet puts on each replica's pods


def _replicas(executor: Kubernetes) -> int:
    return int(executor.requirements.extras.get("num_slices") or executor.requirements.replicas)


def role_hosts(jobset_name: str, role: str, replicas: int) -> list[str]:
    """The DNS names of a role's pods: JobSet gives each pod the hostname
    ``<jobset>-<role>-<replica>-<pod>`` under the headless service named after the JobSet."""
    return [f"{jobset_name}-{role}-{index}-0.{jobset_name}" for index in range(replicas)]


def distributed_env(executor: Kubernetes, hosts: Sequence[str]) -> list[dict[str, Any]]:
    """The framework's variables for each replica of a role: the rank is the replica's index
    (read from its pod's annotation), everything else is the same for every replica, so the
    values that hold the rank refer to it as ``$(XCORE_RANK)``, which Kubernetes expands (the
    rest is written ``literal``)."""
    dist = executor.distributed
    if dist is None:
        return []
    rank = "$(XCORE_RANK)"
    port = dist.port or 29500
    plain = xp.distributed_env(dist, rank=0, world_size=len(hosts), coordinator=hosts[0], port=port,
                               workers=[f"{host}:{port}" for host in hosts])
    values = {key: literal(value) for key, value in plain.items()}
    values.update({key: rank for key in ("RANK", "JAX_PROCESS_ID") if key in values})
    if "TF_CONFIG" in values:  # the index inside the JSON, as Kubernetes expands it
        values["TF_CONFIG"] = values["TF_CONFIG"].replace('"index":0}', f'"index":{rank}}}')
    values.pop("XCORE_RANK")
    field = {"fieldRef": {"fieldPath": f"metadata.annotations['{JOB_INDEX}']"}}
    return [{"name": "XCORE_RANK", "valueFrom": field}, *({"name": k, "value": v} for k, v in values.items())]
