"""A stateful fake Kubernetes API server for xk8s's tests, spoken to by the real client.

No kube-apiserver can run on these machines, so the tests serve the part of the API xk8s
uses over HTTP on 127.0.0.1, behind a real kubeconfig with a bearer token:

- create / get / list (label selectors: ``k=v``, ``k!=v``, ``k in (a,b)``, ``k``) / patch
  (merge) / delete (background propagation to owned objects) of Jobs, Pods, ConfigMaps and
  JobSets; namespaces; SelfSubjectAccessReviews; Kueue LocalQueues; ``/version``;
- ``pods/NAME/log`` with ``follow`` (chunked, until the pod ends);
- Jobs, Pods and ConfigMaps are validated strictly (``kubernetes-validate``) on create, JobSets,
  LocalQueues and Workloads against their CRD schemas (``crd_schemas``): a field the real
  server would reject is a 422 here too;
- a simulated Job controller (Indexed Jobs: parallelism, backoffLimitPerIndex with the
  failure-count annotations on each new pod, the pod failure policy, suspend,
  activeDeadlineSeconds, completed/failed indexes, conditions), a JobSet controller (one
  Job per replicated job and replica), the kubelet's pod ``activeDeadlineSeconds`` (the pod
  fails with reason DeadlineExceeded), and Kueue: a Job
  labelled ``kueue.x-k8s.io/queue-name`` gets a Workload (labelled with the Job's uid) whose
  QuotaReserved condition says why it waits (``kueue_message``, or a missing LocalQueue);
  ``admit`` admits it and unsuspends the Job;
- a kubelet that either runs each pod's container as a local process (``run_pods=True``:
  command, args and env from the pod, with Kubernetes' ``$(NAME)``/``$$`` expansion
  (``xcore.testing.expansion``), ConfigMap volumes materialised in a temporary directory and mount paths
  mapped onto it; the image is ignored) or leaves pods to the test,
  which moves them with ``start``, ``finish``, ``oom_kill``, ``image_pull_backoff``,
  ``unschedulable``, ``preempt``, ``evict`` and ``write_log``.

Every request is recorded in ``requests`` (method, path) so tests count API calls.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from xcore.testing.expansion import expand

TOKEN = "xk8s-fake-token"
INDEX = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
IGNORED_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
KINDS = {  # (api prefix, plural) -> kind
    ("/apis/batch/v1", "jobs"): "Job",
    ("/api/v1", "pods"): "Pod",
    ("/api/v1", "configmaps"): "ConfigMap",
    ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets"): "JobSet",
    ("/apis/kueue.x-k8s.io/v1beta1", "localqueues"): "LocalQueue",
    ("/apis/kueue.x-k8s.io/v1beta1", "workloads"): "Workload",
}
API_VERSION = {"Job": "batch/v1", "Pod": "v1", "ConfigMap": "v1", "JobSet": "jobset.x-k8s.io/v1alpha2",
               "LocalQueue": "kueue.x-k8s.io/v1beta1", "Workload": "kueue.x-k8s.io/v1beta1"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PATH = re.compile(r"(?P<prefix>/apis?/[^/]+(?:/[^/]+)?)/namespaces/(?P<ns>[^/]+)/(?P<plural>[a-z]+)"
                  r"(?:/(?P<name>[^/]+))?(?:/(?P<sub>log))?$")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def body(self) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}


def parse_selector(text: str) -> list[tuple[str, str, set[str]]]:
    """``a=b,c in (d,e),!f`` -> [(key, op, values)]."""
    terms = []
    for term in re.findall(r"[^,(]+(?:\([^)]*\))?", text or ""):
        term = term.strip().strip(",").strip()
        if not term:
            continue
        if m := re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", term):
            terms.append((m[1], m[2], {v.strip() for v in m[3].split(",")}))
        elif m := re.fullmatch(r"(\S+?)\s*(!=|==|=)\s*(\S*)", term):
            terms.append((m[1], "!=" if m[2] == "!=" else "=", {m[3]}))
        elif term.startswith("!"):
            terms.append((term[1:], "absent", set()))
        else:
            terms.append((term, "exists", set()))
    return terms


def go_bool(value: str | None) -> bool:
    """A boolean query parameter as the API server reads it (Go's strconv.ParseBool): clients
    send ``true`` (kubernetes 37) or ``True`` (kubernetes 36, str() of a Python bool)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def matches(labels: dict[str, str], terms: list[tuple[str, str, set[str]]]) -> bool:
    for key, op, values in terms:
        value = labels.get(key)
        if op in ("=", "in") and value not in values:
            return False
        if op in ("!=", "notin") and value in values:
            return False
        if (op == "exists" and value is None) or (op == "absent" and value is not None):
            return False
    return True


def merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """JSON merge patch (RFC 7386)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def format_indexes(indexes: set[int]) -> str:
    out, run = [], []
    for i in sorted(indexes):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


class FakeCluster:
    """The API objects, the controllers and the kubelet, behind one lock."""

    def __init__(self, *, run_pods: bool = False, validate: bool = True, k8s_version: str = "1.33") -> None:
        self.lock = threading.RLock()
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, ns, name)
        self.namespaces = {"default"}
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        self.denied: set[tuple[str, str]] = set()  # (verb, resource) SelfSubjectAccessReview says no to
        self.forbidden: set[str] = set()  # plurals ("workloads") whose LIST answers 403, as RBAC would
        self.requests: list[tuple[str, str]] = []
        self.logs: dict[tuple[str, str], bytearray] = {}
        self.processes: dict[tuple[str, str], subprocess.Popen[bytes]] = {}
        self.workdir = Path(tempfile.mkdtemp(prefix="xk8s-fake-"))
        self.run_pods, self.validate, self.k8s_version = run_pods, validate, k8s_version
        self.rv = 0
        self.errors: list[Exception] = []
        self.paused = False  # True: the controllers and the kubelet do nothing
        self.reject: dict[str, list[tuple[int, str, str]]] = {}  # kind -> errors for its next creates
        #: Why Kueue does not admit a queued Job whose LocalQueue exists (QuotaReserved=False).
        self.kueue_message = ("couldn't assign flavors to pod set main: insufficient unused quota for "
                              "nvidia.com/gpu in flavor a100, 8 more needed")
        self.server: ThreadingHTTPServer | None = None
        self._stop = threading.Event()

    # -- objects ------------------------------------------------------------------------

    def _meta(self, obj: dict[str, Any], kind: str, ns: str) -> dict[str, Any]:
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        meta.update(namespace=ns, uid=str(uuid.uuid4()), resourceVersion=str(self.rv), creationTimestamp=now())
        obj["kind"], obj["apiVersion"] = kind, API_VERSION[kind]
        return obj

    def create(self, kind: str, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if ns not in self.namespaces:
                raise ApiError(404, "NotFound", f'namespaces "{ns}" not found')
            name = (obj.get("metadata") or {}).get("name")
            if self.reject.get(kind):
                code, reason, message = self.reject[kind].pop(0)
                raise ApiError(code, reason, message)
            if (kind, ns, name) in self.objects:
                raise ApiError(409, "AlreadyExists", f'{kind.lower()}s "{name}" already exists')
            if self.validate and kind in ("Job", "ConfigMap", "Pod"):
                self._validate(obj)
            elif self.validate:
                self._validate_crd({**obj, "kind": kind, "apiVersion": obj.get("apiVersion") or API_VERSION[kind]})
            obj = self._meta(copy.deepcopy(obj), kind, ns)
            if kind == "Job":
                obj["status"] = {}
                obj["_fake"] = {"failures": {}, "completed": [], "failed": [], "accounted": []}
            self.objects[(kind, ns, obj["metadata"]["name"])] = obj
            return obj  # the controllers act on their next tick, as in a real cluster

    def _validate(self, obj: dict[str, Any]) -> None:
        import kubernetes_validate

        try:
            kubernetes_validate.validate(obj, self.k8s_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise ApiError(422, "Invalid", f"{obj.get('kind')} is invalid: {exc.message} at {list(exc.path)}") from None

    def _validate_crd(self, obj: dict[str, Any]) -> None:
        import jsonschema

        try:
            _crd_schemas().validate(obj)
        except jsonschema.ValidationError as exc:
            raise ApiError(422, "Invalid", f"{obj.get('kind')} is invalid: {exc.message} at {list(exc.path)}") from None

    def get(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind.lower()}s "{name}" not found')
            return obj

    def list(self, kind: str, ns: str, selector: str = "") -> list[dict[str, Any]]:
        terms = parse_selector(selector)
        with self.lock:
            return [o for (k, n, _), o in self.objects.items()
                    if k == kind and n == ns and matches(o["metadata"].get("labels") or {}, terms)]

    def patch(self, kind: str, ns: str, name: str, body: Any) -> dict[str, Any]:
        with self.lock:
            obj = self.get(kind, ns, name)
            if isinstance(body, list):
                raise ApiError(415, "UnsupportedMediaType", "the fake accepts merge patches only")
            merge(obj, body)
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.reconcile()
            return obj

    def delete(self, kind: str, ns: str, name: str, propagation: str | None = None) -> dict[str, Any]:
        with self.lock:
            obj = self.get(kind, ns, name)
            del self.objects[(kind, ns, name)]
            if kind == "Pod":
                self._pod_deleted(obj)
            if propagation in ("Background", "Foreground") or kind in ("Job", "JobSet") and propagation is None:
                uid = obj["metadata"]["uid"]
                for (k, n, child), o in list(self.objects.items()):
                    owners = [r.get("uid") for r in o["metadata"].get("ownerReferences") or []]
                    if n == ns and uid in owners and (k, n, child) in self.objects:
                        self.delete(k, n, child, "Background")
            self.reconcile()
            return {"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}}

    # -- pods and the kubelet -----------------------------------------------------------

    def pods(self, job: str, index: int | None = None, ns: str = "default") -> list[dict[str, Any]]:
        sel = f"job-name={job}" + (f",{INDEX}={index}" if index is not None else "")
        self.reconcile()  # let the controllers catch up first
        return sorted(self.list("Pod", ns, sel), key=lambda p: p["metadata"]["creationTimestamp"])

    def pod(self, job: str, index: int = 0, ns: str = "default") -> dict[str, Any]:
        pods = self.pods(job, index, ns)
        assert pods, f"no pod for {job} index {index}"
        return pods[-1]

    def _container(self, pod: dict[str, Any], state: dict[str, Any]) -> None:
        pod["status"]["containerStatuses"] = [{"name": "main", "image": pod["spec"]["containers"][0]["image"],
                                               "imageID": "", "ready": "running" in state, "restartCount": 0,
                                               "state": state}]

    def start(self, job: str, index: int = 0, ns: str = "default", node: str = "node-1") -> dict[str, Any]:
        with self.lock:
            pod = self.pod(job, index, ns)
            pod["spec"]["nodeName"] = node
            pod["status"].update(phase="Running", startTime=now())
            self._container(pod, {"running": {"startedAt": now()}})
            self.reconcile()
            return pod

    def finish(self, job: str, index: int = 0, exit_code: int = 0, ns: str = "default", reason: str | None = None,
               pod: dict[str, Any] | None = None) -> None:
        with self.lock:
            pod = pod or self.pod(job, index, ns)
            started = ((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("running", {})
            pod["status"]["phase"] = "Succeeded" if exit_code == 0 else "Failed"
            self._container(pod, {"terminated": {"exitCode": exit_code, "reason": reason or (
                "Completed" if exit_code == 0 else "Error"), "startedAt": started.get("startedAt", now()),
                "finishedAt": now()}})
            self.reconcile()

    def oom_kill(self, job: str, index: int = 0, ns: str = "default") -> None:
        self.finish(job, index, 137, ns, reason="OOMKilled")

    def image_pull_backoff(self, job: str, index: int = 0, ns: str = "default") -> None:
        with self.lock:
            pod = self.pod(job, index, ns)
            image = pod["spec"]["containers"][0]["image"]
            self._container(pod, {"waiting": {"reason": "ImagePullBackOff",
                                              "message": f'Back-off pulling image "{image}"'}})

    def unschedulable(self, job: str, index: int = 0, ns: str = "default") -> None:
        with self.lock:
            pod = self.pod(job, index, ns)
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]

    def preempt(self, job: str, index: int = 0, ns: str = "default") -> None:
        with self.lock:
            pod = self.pod(job, index, ns)
            pod["status"].setdefault("conditions", []).append(
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                 "message": "Preempted in order to admit critical pod"})
            self._kill(pod)
            self.finish(job, index, 143, ns, pod=pod)

    def evict(self, job: str, index: int = 0, ns: str = "default") -> None:
        """An API-initiated eviction (node drain): DisruptionTarget, the pod is terminated."""
        with self.lock:
            pod = self.pod(job, index, ns)
            pod["status"].setdefault("conditions", []).append(
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                 "message": "Eviction API: evicting"})
            self._kill(pod)
            self.finish(job, index, 143, ns, pod=pod)

    def workload(self, job: str, ns: str = "default", kind: str = "Job") -> dict[str, Any]:
        """The Kueue Workload of ``job`` (a Job, or a JobSet with ``kind="JobSet"``)."""
        self.reconcile()
        uid = self.get(kind, ns, job)["metadata"]["uid"]
        [workload] = self.list("Workload", ns, f"{JOB_UID_LABEL}={uid}")
        return workload

    def admit(self, job: str, ns: str = "default", kind: str = "Job") -> None:
        """Kueue admits ``job``'s Workload and unsuspends the Job (or JobSet)."""
        with self.lock:
            workload = self.workload(job, ns, kind)
            workload["status"]["conditions"] = [
                {"type": kind, "status": "True", "reason": reason, "message": message,
                 "lastTransitionTime": now(), "observedGeneration": 1}
                for kind, reason, message in (("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue lab"),
                                              ("Admitted", "Admitted", "The workload is admitted"))]
            self._validate_crd(_public(workload))
            self.patch(kind, ns, job, {"spec": {"suspend": False}})

    def write_log(self, pod_name: str, data: bytes, ns: str = "default") -> None:
        with self.lock:
            self.logs.setdefault((ns, pod_name), bytearray()).extend(data)

    def _kill(self, pod: dict[str, Any], sig: int = signal.SIGTERM) -> None:
        proc = self.processes.get((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        """A deleted pod is terminated; its Job controller counts it as a failed pod."""
        self._kill(pod)
        if pod["status"].get("phase") not in ("Succeeded", "Failed"):
            pod["status"]["phase"] = "Failed"
            self._container(pod, {"terminated": {"exitCode": 143, "reason": "Error", "finishedAt": now()}})
        job = self._owner_job(pod)
        if job is not None:
            job["_fake"].setdefault("deleted", []).append(pod)

    def _owner_job(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        name = (pod["metadata"].get("labels") or {}).get("job-name")
        return self.objects.get(("Job", pod["metadata"]["namespace"], name))

    def _run(self, pod: dict[str, Any]) -> None:
        """The kubelet: start the container as a local process if its volumes exist."""
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        spec = pod["spec"]
        mounts: dict[str, Path] = {}
        container = spec["containers"][0]
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for mount in container.get("volumeMounts") or []:
            volume = volumes[mount["name"]]
            target = self.workdir / name / mount["name"]
            target.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                cm = self.objects.get(("ConfigMap", ns, volume["configMap"]["name"]))
                if cm is None:
                    self._container(pod, {"waiting": {"reason": "ContainerCreating"}})
                    return  # waits for the ConfigMap, like a real kubelet
                for key, value in (cm.get("data") or {}).items():
                    (target / key).write_text(value, encoding="utf-8")
            mounts[mount["mountPath"]] = target

        def mapped(arg: str) -> str:
            for path, local in mounts.items():
                if arg == path or arg.startswith(path + "/"):
                    return str(local) + arg[len(path):]
            return arg

        defined: dict[str, str] = {}  # the container's variables, each value expanded as it is defined
        for item in container.get("env") or []:
            if "value" in item:
                defined[item["name"]] = expand(item["value"], defined)
            elif ref := (item.get("valueFrom") or {}).get("secretKeyRef"):
                defined[item["name"]] = self.secrets.get((ns, ref["name"]), {}).get(ref["key"], "")
            elif field := (item.get("valueFrom") or {}).get("fieldRef"):  # the downward API: labels, annotations
                where, _, key = field["fieldPath"].removesuffix("']").partition("['")
                defined[item["name"]] = (pod["metadata"].get(where.removeprefix("metadata.")) or {}).get(key, "")
        if INDEX in (pod["metadata"].get("annotations") or {}):  # the Job controller appends it to the env
            defined["JOB_COMPLETION_INDEX"] = pod["metadata"]["annotations"][INDEX]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOSTNAME": name, **defined}
        words = [*(container.get("command") or []), *(container.get("args") or [])]
        argv = [mapped(expand(word, defined)) for word in words]
        log = self.workdir / name / "log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            try:
                proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            except OSError as exc:
                out.write(f"exec failed: {exc}\n".encode())
                self.finish("", pod=pod, exit_code=128)
                return
        self.processes[(ns, name)] = proc
        pod["spec"]["nodeName"] = "fake-kubelet"
        pod["status"].update(phase="Running", startTime=now())
        self._container(pod, {"running": {"startedAt": now()}})

    def _reap(self) -> None:
        for (ns, name), proc in list(self.processes.items()):
            code = proc.poll()
            if code is None or self.processes.pop((ns, name), None) is None:
                continue  # running, or reaped by a nested reconcile
            pod = self.objects.get(("Pod", ns, name))
            if pod is not None and pod["status"].get("phase") == "Running":
                self.finish("", pod=pod, exit_code=128 - code if code < 0 else code)

    def pod_log(self, ns: str, name: str) -> bytes:
        with self.lock:
            if ("Pod", ns, name) not in self.objects:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            pod = self.objects[("Pod", ns, name)]
            if "containerStatuses" not in pod["status"] or "waiting" in pod["status"]["containerStatuses"][0]["state"]:
                raise ApiError(400, "BadRequest", f'container "main" in pod "{name}" is waiting to start')
            log = self.workdir / name / "log"
            data = log.read_bytes() if log.exists() else b""
            return data + bytes(self.logs.get((ns, name), b""))

    def pod_done(self, ns: str, name: str) -> bool:
        with self.lock:
            pod = self.objects.get(("Pod", ns, name))
            return pod is None or pod["status"].get("phase") in ("Succeeded", "Failed")

    # -- controllers --------------------------------------------------------------------

    def reconcile(self) -> None:
        if self.paused:
            return
        with self.lock:
            if self.run_pods:
                self._reap()
            for (kind, ns, _name), obj in list(self.objects.items()):
                if kind == "JobSet" and not obj.get("_created"):
                    self._jobset(ns, obj)
                if kind == "JobSet":
                    self._kueue(ns, obj)
                    self._jobset_suspend(ns, obj)
            for (kind, _ns, _name), obj in list(self.objects.items()):
                if kind == "Pod":
                    self._pod_deadline(obj)
            for (kind, ns, _name), obj in list(self.objects.items()):
                if kind == "Job":
                    self._kueue(ns, obj)
                    self._job(ns, obj)
            if self.run_pods:
                for (kind, _ns, _name), obj in list(self.objects.items()):
                    if kind == "Pod" and obj["status"].get("phase") == "Pending" and \
                            ("Pod", _ns, _name) not in self.processes:
                        self._run(obj)

    def _pod_deadline(self, pod: dict[str, Any]) -> None:
        """The kubelet fails a pod active longer than its ``activeDeadlineSeconds``."""
        deadline, started = pod["spec"].get("activeDeadlineSeconds"), pod["status"].get("startTime")
        if not deadline or not started or pod["status"].get("phase") in ("Succeeded", "Failed"):
            return
        if time.time() - _ts(started) <= deadline:
            return
        self._kill(pod, signal.SIGKILL)
        proc = self.processes.pop((pod["metadata"]["namespace"], pod["metadata"]["name"]), None)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        pod["status"].update(phase="Failed", reason="DeadlineExceeded",
                             message="Pod was active on the node longer than the specified deadline")
        running = (pod["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("running", {})
        self._container(pod, {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": now(),
                                             "startedAt": running.get("startedAt", now())}})

    def _kueue(self, ns: str, job: dict[str, Any]) -> None:
        """Kueue's job integration: a Workload per queued Job or JobSet, pending until ``admit``."""
        labels = job["metadata"].get("labels") or {}
        queue = labels.get(QUEUE_LABEL)
        fake = job.setdefault("_fake", {})
        if not queue or fake.get("workload") or "jobset.sigs.k8s.io/jobset-name" in labels:
            return
        uid = job["metadata"]["uid"]
        if ("LocalQueue", ns, queue) in self.objects:
            reason, message = "Pending", self.kueue_message
        else:
            reason, message = "Inadmissible", f"LocalQueue {queue} doesn't exist"
        spec, kind = job["spec"], job.get("kind", "Job")
        if kind == "JobSet":
            pod_sets = [{"name": r["name"], "template": copy.deepcopy(r["template"]["spec"]["template"]),
                         "count": r.get("replicas", 1) * r["template"]["spec"].get("parallelism", 1)}
                        for r in spec["replicatedJobs"]]
        else:
            pod_sets = [{"name": "main", "count": spec.get("parallelism", 1),
                         "template": copy.deepcopy(spec["template"])}]
        workload = {
            "apiVersion": API_VERSION["Workload"], "kind": "Workload",
            "metadata": {"name": f"{kind.lower()}-{job['metadata']['name']}-{uid[:5]}",
                         "labels": {JOB_UID_LABEL: uid},
                         "ownerReferences": [{"apiVersion": API_VERSION[kind], "kind": kind, "controller": True,
                                              "blockOwnerDeletion": True, "name": job["metadata"]["name"],
                                              "uid": uid}]},
            "spec": {"queueName": queue, "active": True, "podSets": pod_sets},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": reason,
                                       "message": message, "lastTransitionTime": now(), "observedGeneration": 1}]},
        }
        if labels.get(PRIORITY_LABEL):
            workload["spec"].update(priorityClassName=labels[PRIORITY_LABEL], priority=1000,
                                    priorityClassSource="kueue.x-k8s.io/workloadpriorityclass")
        self._validate_crd(workload)
        workload = self._meta(workload, "Workload", ns)
        self.objects[("Workload", ns, workload["metadata"]["name"])] = workload
        fake["workload"] = workload["metadata"]["name"]

    def _jobset_suspend(self, ns: str, jobset: dict[str, Any]) -> None:
        """The JobSet controller keeps its Jobs suspended while the JobSet is."""
        suspend = bool(jobset["spec"].get("suspend"))
        for (kind, n, _), job in list(self.objects.items()):
            if kind == "Job" and n == ns and any(r.get("uid") == jobset["metadata"]["uid"]
                                                 for r in job["metadata"].get("ownerReferences") or []):
                job["spec"]["suspend"] = suspend

    def _jobset(self, ns: str, jobset: dict[str, Any]) -> None:
        jobset["_created"] = True
        for rjob in jobset["spec"]["replicatedJobs"]:
            for replica in range(rjob.get("replicas", 1)):
                template = copy.deepcopy(rjob["template"])
                meta = template.setdefault("metadata", {})
                meta["name"] = f"{jobset['metadata']['name']}-{rjob['name']}-{replica}"
                meta.setdefault("labels", {})["jobset.sigs.k8s.io/jobset-name"] = jobset["metadata"]["name"]
                pod_meta = template["spec"]["template"].setdefault("metadata", {})  # JobSet marks each pod
                pod_meta.setdefault("annotations", {})[JOB_INDEX] = str(replica)
                pod_meta.setdefault("labels", {})[JOB_INDEX] = str(replica)
                pod_meta["labels"][RESTART_ATTEMPT] = "0"
                meta["ownerReferences"] = [{"apiVersion": API_VERSION["JobSet"], "kind": "JobSet",
                                            "name": jobset["metadata"]["name"], "uid": jobset["metadata"]["uid"]}]
                job = self._meta({"metadata": meta, "spec": template["spec"]}, "Job", ns)
                job["status"] = {}
                job["_fake"] = {"failures": {}, "completed": [], "failed": [], "accounted": []}
                self.objects[("Job", ns, meta["name"])] = job

    def _job(self, ns: str, job: dict[str, Any]) -> None:
        spec, status, fake = job["spec"], job["status"], job["_fake"]
        name = job["metadata"]["name"]
        if any(c["type"] in ("Complete", "Failed") for c in status.get("conditions") or []):
            return
        completions = spec.get("completions", 1)
        completed, failed = set(fake["completed"]), set(fake["failed"])
        pods = [o for (k, n, _), o in self.objects.items() if k == "Pod" and n == ns
                and (o["metadata"].get("labels") or {}).get("job-name") == name]
        for pod in pods + fake.pop("deleted", []):
            pod_name = pod["metadata"]["name"]
            phase = pod["status"].get("phase")
            if phase not in ("Succeeded", "Failed") or pod_name in fake["accounted"]:
                continue
            fake["accounted"].append(pod_name)
            index = int(pod["metadata"]["annotations"][INDEX])
            if phase == "Succeeded":
                completed.add(index)
                continue
            action = self._failure_action(spec, pod)
            status["failed"] = status.get("failed", 0) + (action != "Ignore")
            if action == "Ignore":
                ignored = fake.setdefault("ignored", {})
                ignored[str(index)] = ignored.get(str(index), 0) + 1
            if action == "FailIndex":
                failed.add(index)
            elif action == "FailJob":
                self._finish_job(job, "Failed", "PodFailurePolicy", "a pod failure policy rule matched")
                return  # a failed Job gets no new pods
            elif action == "Count":
                fake["failures"][str(index)] = fake["failures"].get(str(index), 0) + 1
                if fake["failures"][str(index)] > spec.get("backoffLimitPerIndex", 6):
                    failed.add(index)
        fake["completed"], fake["failed"] = sorted(completed), sorted(failed)
        status["completedIndexes"] = format_indexes(completed)
        status["failedIndexes"] = format_indexes(failed)
        status["succeeded"] = len(completed)
        deadline = spec.get("activeDeadlineSeconds")
        if status.get("startTime") and deadline and time.time() - _ts(status["startTime"]) > deadline:
            self._finish_job(job, "Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
            return
        if len(completed | failed) >= completions:
            if failed:
                self._finish_job(job, "Failed", "FailedIndexes", "Job has failed indexes")
            else:
                self._finish_job(job, "Complete", "CompletionsReached", "Reached expected number of succeeded pods")
            return
        if spec.get("suspend"):
            status["active"] = 0
            return
        status.setdefault("startTime", now())
        active = {int(p["metadata"]["annotations"][INDEX]) for p in pods
                  if p["status"].get("phase") not in ("Succeeded", "Failed")}
        status["active"] = len(active)
        budget = spec.get("parallelism", 1) - len(active)
        for index in range(completions):
            if budget <= 0:
                break
            if index in completed or index in failed or index in active:
                continue
            self._new_pod(ns, job, index)
            active.add(index)
            budget -= 1
        status["active"] = len(active)

    def _failure_action(self, spec: dict[str, Any], pod: dict[str, Any]) -> str:
        conditions = {c["type"] for c in pod["status"].get("conditions") or [] if c.get("status") == "True"}
        term = pod["status"]["containerStatuses"][0]["state"].get("terminated", {})
        for rule in (spec.get("podFailurePolicy") or {}).get("rules", []):
            if "onPodConditions" in rule and any(c["type"] in conditions for c in rule["onPodConditions"]):
                return rule["action"]
            codes = rule.get("onExitCodes")
            if codes:
                inside = term.get("exitCode") in codes["values"]
                if inside == (codes["operator"] == "In"):
                    return rule["action"]
        return "Count"

    def _finish_job(self, job: dict[str, Any], kind: str, reason: str, message: str) -> None:
        job["status"].setdefault("conditions", []).append(
            {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now()})
        job["status"]["active"] = 0
        if kind == "Complete":
            job["status"]["completionTime"] = now()
        for (k, n, _), pod in list(self.objects.items()):
            if k == "Pod" and n == job["metadata"]["namespace"] and \
                    (pod["metadata"].get("labels") or {}).get("job-name") == job["metadata"]["name"] and \
                    pod["status"].get("phase") not in ("Succeeded", "Failed"):
                self._kill(pod, signal.SIGKILL)
                pod["status"]["phase"] = "Failed"
                self._container(pod, {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": now()}})

    def _new_pod(self, ns: str, job: dict[str, Any], index: int) -> None:
        template = copy.deepcopy(job["spec"]["template"])
        name = job["metadata"]["name"]
        meta = template.get("metadata") or {}
        labels = {**(meta.get("labels") or {}), "job-name": name, "batch.kubernetes.io/job-name": name,
                  "controller-uid": job["metadata"]["uid"], INDEX: str(index)}
        annotations = {**(meta.get("annotations") or {}), INDEX: str(index)}
        if "backoffLimitPerIndex" in job["spec"]:  # the Job controller counts the index's failed pods
            annotations[FAILURE_COUNT] = str(job["_fake"]["failures"].get(str(index), 0))
            ignored = job["_fake"].get("ignored", {}).get(str(index), 0)
            if ignored:
                annotations[IGNORED_COUNT] = str(ignored)
        pod = {"metadata": {"name": f"{name}-{index}-{secrets.token_hex(3)[:5]}", "labels": labels,
                            "annotations": annotations,
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                                 "uid": job["metadata"]["uid"], "controller": True}]},
               "spec": template["spec"], "status": {"phase": "Pending"}}
        pod = self._meta(pod, "Pod", ns)
        self.objects[("Pod", ns, pod["metadata"]["name"])] = pod

    # -- serving ------------------------------------------------------------------------

    def serve(self) -> str:
        cluster = self

        class Handler(_Handler):
            fake = cluster

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        threading.Thread(target=self._tick, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _tick(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.reconcile()
            except Exception as exc:  # noqa: BLE001 - kept for the test to see; the controllers go on
                self.errors.append(exc)

    def kubeconfig(self, path: Path, context: str = "fake", namespace: str = "default") -> Path:
        url = f"http://127.0.0.1:{self.server.server_address[1]}"  # type: ignore[union-attr]
        config = {"apiVersion": "v1", "kind": "Config", "current-context": context,
                  "clusters": [{"name": "fake", "cluster": {"server": url}}],
                  "users": [{"name": "tester", "user": {"token": TOKEN}}],
                  "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester",
                                                              "namespace": namespace}}]}
        path.write_text(json.dumps(config))
        path.chmod(0o600)
        return path

    def close(self) -> None:
        self._stop.set()
        if self.server:
            self.server.shutdown()
            self.server.server_close()
        with self.lock:
            for pod in [o for (k, _, _), o in self.objects.items() if k == "Pod"]:
                self._kill(pod, signal.SIGKILL)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def calls(self, method: str | None = None, contains: str = "") -> int:
        return sum(1 for m, p in self.requests if (method is None or m == method) and contains in p)


def _crd_schemas() -> Any:
    """tests/crd_schemas.py, found next to this file whatever ``sys.path`` is."""
    import importlib.util
    import sys

    module = sys.modules.get("crd_schemas")
    if module is None:
        spec = importlib.util.spec_from_file_location("crd_schemas", Path(__file__).with_name("crd_schemas.py"))
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["crd_schemas"] = module
        spec.loader.exec_module(module)
    return module


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _public(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if not k.startswith("_")}


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up (pool shutdown, a stopped log follow) is normal here


class _Handler(BaseHTTPRequestHandler):
    fake: FakeCluster
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    def _route(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self.fake.requests.append((method, url.path))
        body = self._body() if method in ("POST", "PATCH", "PUT", "DELETE") else None
        try:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            self._dispatch(method, url.path, query, body)
        except ApiError as exc:
            self._send(exc.code, exc.body())

    def _dispatch(self, method: str, path: str, query: dict[str, str], body: Any) -> None:
        fake = self.fake
        if path.rstrip("/") == "/version":
            return self._send(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-xk8s-fake",
                                    "gitCommit": "0" * 40, "gitTreeState": "clean",
                                    "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24",
                                    "compiler": "gc", "platform": "linux/amd64"})
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)", path):
            if m[1] not in fake.namespaces:
                raise ApiError(404, "NotFound", f'namespaces "{m[1]}" not found')
            return self._send(200, {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": m[1]}})
        if path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" and method == "POST":
            attrs = body["spec"]["resourceAttributes"]
            resource = attrs["resource"] + (f"/{attrs['subresource']}" if attrs.get("subresource") else "")
            allowed = (attrs["verb"], resource) not in fake.denied
            return self._send(201, {**body, "status": {"allowed": allowed, **({} if allowed else {"reason": "RBAC"})}})
        m = PATH.fullmatch(path)
        if not m or (m["prefix"], m["plural"]) not in KINDS:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        kind, ns, name = KINDS[(m["prefix"], m["plural"])], m["ns"], m["name"]
        if m["sub"] == "log":
            return self._log(ns, name, go_bool(query.get("follow")))
        if method == "POST" and not name:
            return self._send(201, _public(fake.create(kind, ns, body)))
        if method == "GET" and not name and m["plural"] in fake.forbidden:
            raise ApiError(403, "Forbidden", f'{m["plural"]} is forbidden: User "tester" cannot list resource '
                                             f'"{m["plural"]}" in the namespace "{ns}"')
        if method == "GET" and not name:
            items = [_public(o) for o in fake.list(kind, ns, query.get("labelSelector", ""))]
            return self._send(200, {"kind": f"{kind}List", "apiVersion": API_VERSION[kind],
                                    "metadata": {"resourceVersion": str(fake.rv)}, "items": items})
        if method == "GET":
            return self._send(200, _public(fake.get(kind, ns, name)))
        if method == "PATCH":
            return self._send(200, _public(fake.patch(kind, ns, name, body)))
        if method == "DELETE":
            policy = (body or {}).get("propagationPolicy") or query.get("propagationPolicy")
            return self._send(200, fake.delete(kind, ns, name, policy))
        raise ApiError(405, "MethodNotAllowed", f"{method} {path}")

    def _log(self, ns: str, name: str, follow: bool) -> None:
        fake = self.fake
        data = fake.pod_log(ns, name)
        if not follow:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        while True:
            done = fake.pod_done(ns, name)
            with contextlib.suppress(ApiError):
                data = fake.pod_log(ns, name)
            if len(data) > sent:
                chunk = data[sent:]
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
                sent = len(data)
            elif done:
                break
            else:
                time.sleep(0.05)
        self.wfile.write(b"0\r\n\r\n")

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_DELETE(self) -> None:
        self._route("DELETE")
