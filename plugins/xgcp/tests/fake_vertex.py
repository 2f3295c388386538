"""A stateful fake of the Vertex AI custom-jobs REST API and Cloud Logging's entries:list,
(and the Cloud Quotas API's quotaInfos for ``xcore vertex check``) on 127.0.0.1, for tests and benchmarks.

Request bodies are parsed with the real ``aiplatform_v1`` message types, so a misspelled
field is a 400 as on Vertex. Jobs move QUEUED -> PENDING -> RUNNING -> SUCCEEDED / FAILED /
CANCELLED. With ``auto_run=True`` the fake *runs* each replica as a local process, using
the image's entrypoint and working directory registered with ``add_image`` (the container
runtime is the one thing it does not emulate), and turns each output line into a log entry
as Vertex's logging agent does. With ``auto_run=False`` jobs wait in PENDING and the test
moves them with ``set_state``. ``fail(...)`` answers quota or permission errors on demand.
"""

from __future__ import annotations

import collections
import datetime
import itertools
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.cloud import aiplatform_v1

from xcore.testing.expansion import expand

JobState = aiplatform_v1.JobState
TERMINAL = {JobState.JOB_STATE_SUCCEEDED, JobState.JOB_STATE_FAILED, JobState.JOB_STATE_CANCELLED,
            JobState.JOB_STATE_EXPIRED}
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
LABEL_RE = re.compile(r"[a-z][a-z0-9_-]{0,62}")


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def rfc3339(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ApiError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Image:
    def __init__(self, entrypoint: list[str], workdir: str | None = None, env: dict[str, str] | None = None) -> None:
        self.entrypoint, self.workdir, self.env = entrypoint, workdir, env or {}


class Failure:
    """An injected error: ``method`` calls after the first ``after`` answer ``code`` ``times`` times;
    ``create_anyway``: the create happens but its answer is lost (the client sees the error)."""

    def __init__(self, method: str, code: int, message: str, times: int, after: int, create_anyway: bool) -> None:
        self.method, self.code, self.message = method, code, message
        self.times, self.after, self.create_anyway = times, after, create_anyway


class FakeVertex:
    def __init__(self, auto_run: bool = True) -> None:
        self.auto_run = auto_run
        self.jobs: dict[str, aiplatform_v1.CustomJob] = {}
        self.order: list[str] = []
        self.images: dict[str, Image] = {}
        self.entries: list[dict[str, Any]] = []
        self.calls: collections.Counter[str] = collections.Counter()
        self.failures: list[Failure] = []
        self.processes: dict[str, list[subprocess.Popen[bytes]]] = {}
        self.lock = threading.RLock()
        self._ids = itertools.count(1000)
        self._insert = itertools.count(1)
        self.server: ThreadingHTTPServer | None = None
        self.unlisted: set[str] = set()  # jobs list does not return yet (a list lagging a create)
        self.create_delay = 0.0  # seconds each create takes (to observe concurrency)
        self.in_flight = self.max_in_flight = 0
        # Cloud Quotas: metric (without "aiplatform.googleapis.com/") -> {region ("" = default): limit}
        self.quotas: dict[str, dict[str, int]] = {
            "custom_model_training_cpus": {"": 575, "europe-west4": 32},
            "custom_model_training_nvidia_t4_gpus": {"": 0, "us-central1": 4},
            "custom_model_training_nvidia_a100_gpus": {"": 0},
            "custom_model_training_nvidia_l4_gpus": {"": 0, "us-central1": 8},
            "online_prediction_cpus": {"": 1000},  # not a training quota: not shown
        }

    # -- test controls -------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FakeVertex:
        fake = self

        class Handler(_Handler):
            vertex = fake

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        with self.lock:
            procs = [p for group in self.processes.values() for p in group]
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def add_image(self, uri: str, entrypoint: list[str], workdir: str | None = None,
                  env: dict[str, str] | None = None) -> None:
        self.images[uri] = Image(entrypoint, workdir, env)

    def fail(self, method: str, code: int = 429, message: str = "Quota exceeded for aiplatform.googleapis.com/"
             "custom_model_training_cpus", times: int = 1, after: int = 0, create_anyway: bool = False) -> None:
        with self.lock:
            self.failures.append(Failure(method, code, message, times, after, create_anyway))

    def set_state(self, name: str, state: str, error: str | None = None) -> None:
        with self.lock:
            job = self.jobs[name]
            job.state = JobState[f"JOB_STATE_{state}"]
            if state == "RUNNING" and not job.start_time:
                job.start_time = now()
            if job.state in TERMINAL:
                job.end_time = now()
            if error:
                job.error = {"code": 3, "message": error}

    def forget(self, name: str) -> None:
        with self.lock:
            self.jobs.pop(name, None)

    def log(self, job_id: str, task: str, text: str) -> None:
        with self.lock:
            self.entries.append({"insertId": f"e{next(self._insert)}", "timestamp": rfc3339(now()),
                                 "textPayload": text, "resource": {"type": "ml_job", "labels": {
                                     "job_id": job_id, "task_name": task, "project_id": "fake"}}})

    def by_label(self, key: str, value: str) -> list[aiplatform_v1.CustomJob]:
        with self.lock:
            return [j for j in self.jobs.values() if j.labels.get(key) == value]

    # -- the API -------------------------------------------------------------------------

    def _inject(self, method: str) -> Failure | None:
        with self.lock:
            for failure in self.failures:
                if failure.method != method or failure.times <= 0:
                    continue
                if failure.after > 0:
                    failure.after -= 1
                    continue
                failure.times -= 1
                return failure
        return None

    def create(self, parent: str, body: str) -> aiplatform_v1.CustomJob:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.create_delay)
            return self._create(parent, body)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _create(self, parent: str, body: str) -> aiplatform_v1.CustomJob:
        failure = self._inject("create")
        if failure and not failure.create_anyway:
            raise ApiError(failure.code, failure.message)
        try:
            job = aiplatform_v1.CustomJob.from_json(body)
        except Exception as exc:  # noqa: BLE001  (unknown or mistyped field: a 400, as on Vertex)
            raise ApiError(400, f"Invalid JSON payload received. {exc}") from None
        self._validate(job)
        with self.lock:
            job_id = str(next(self._ids))
            job.name = f"{parent}/customJobs/{job_id}"
            job.state = JobState.JOB_STATE_PENDING
            job.create_time = now()
            self.jobs[job.name] = job
            self.order.append(job.name)
        if self.auto_run:
            threading.Thread(target=self._run, args=(job.name,), daemon=True).start()
        if failure:  # created, but the client never hears it
            raise ApiError(failure.code, failure.message)
        return job

    def _validate(self, job: aiplatform_v1.CustomJob) -> None:
        pools = job.job_spec.worker_pool_specs
        if not job.display_name:
            raise ApiError(400, "CustomJob.display_name is required.")
        if not pools or not pools[0].machine_spec.machine_type:
            raise ApiError(400, "The first worker pool needs a machine_spec.machine_type.")
        if pools[0].replica_count != 1 and not pools[0].machine_spec.tpu_topology:
            raise ApiError(400, "The first worker pool must have replica_count 1.")
        for pool in pools:
            if pool.machine_spec.machine_type and not pool.container_spec.image_uri:
                raise ApiError(400, "container_spec.image_uri is required.")
            if pool.machine_spec.tpu_topology:
                self._validate_tpu(pool)
        for key, value in job.labels.items():
            if not LABEL_RE.fullmatch(key) or not re.fullmatch(r"[a-z0-9_-]{0,63}", value):
                raise ApiError(400, f"Invalid label {key}={value!r}.")

    def _validate_tpu(self, pool: Any) -> None:
        """A TPU slice: the topology's chips spread over hosts of the machine type's chip count,
        one replica per host."""
        spec = pool.machine_spec
        per_host = re.search(r"-(\d+)t$", spec.machine_type)
        if not per_host or not re.fullmatch(r"\d+(x\d+){1,2}", spec.tpu_topology):
            raise ApiError(400, f"tpu_topology {spec.tpu_topology!r} is not valid for {spec.machine_type}.")
        chips = 1
        for size in spec.tpu_topology.split("x"):
            chips *= int(size)
        if chips % int(per_host.group(1)):
            raise ApiError(400, f"tpu_topology {spec.tpu_topology} does not fit {spec.machine_type} hosts.")
        hosts = chips // int(per_host.group(1))
        if pool.replica_count != hosts:
            raise ApiError(400, f"replica_count must be {hosts} for tpu_topology {spec.tpu_topology} on "
                                f"{spec.machine_type}, got {pool.replica_count}.")

    def get(self, name: str) -> aiplatform_v1.CustomJob:
        with self.lock:
            if name not in self.jobs:
                raise ApiError(404, f"The CustomJob {name} does not exist.")
            return self.jobs[name]

    def list(self, parent: str, filter_: str, page_size: int, token: str) -> tuple[list[Any], str]:
        failure = self._inject("list")
        if failure:
            raise ApiError(failure.code, failure.message)
        predicate = parse_filter(filter_)
        with self.lock:
            jobs = [self.jobs[n] for n in self.order
                    if n in self.jobs and n not in self.unlisted and n.startswith(parent + "/")]
        jobs = [j for j in jobs if predicate(dict(j.labels))]
        start = int(token or 0)
        size = min(page_size or 100, 1000)
        page = jobs[start:start + size]
        return page, (str(start + size) if start + size < len(jobs) else "")

    def cancel(self, name: str) -> None:
        failure = self._inject("cancel")
        if failure:
            raise ApiError(failure.code, failure.message)
        with self.lock:
            job = self.get(name)
            if job.state in TERMINAL:
                raise ApiError(400, f"Cannot cancel CustomJob {name}: it is in state {job.state.name}.")
            job.state = JobState.JOB_STATE_CANCELLING
            procs = list(self.processes.get(name, []))
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        if not procs:
            self.set_state(name, "CANCELLED")

    def entries_list(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls["logs"] += 1
        failure = self._inject("logs")
        if failure:
            raise ApiError(failure.code, failure.message)
        predicate = parse_log_filter(body.get("filter", ""))
        with self.lock:
            matching = [e for e in self.entries if predicate(e)]
        matching.sort(key=lambda e: e["timestamp"])
        start = int(body.get("pageToken") or 0)
        size = int(body.get("pageSize") or 50)
        result: dict[str, Any] = {"entries": matching[start:start + size]}
        if start + size < len(matching):
            result["nextPageToken"] = str(start + size)
        return result

    def quota_infos(self, project: str, page_size: int, token: str) -> dict[str, Any]:
        """quotaInfos as the Cloud Quotas API lists them (limits per region dimension)."""
        failure = self._inject("quotas")
        if failure:
            raise ApiError(failure.code, failure.message)
        infos = []
        for metric, limits in sorted(self.quotas.items()):
            entries = [{"dimensions": {"region": region} if region else {}, "details": {"value": str(limit)},
                        **({"applicableLocations": [region]} if region else {})}
                       for region, limit in limits.items()]
            quota_id = "".join(part.title() for part in metric.split("_")) + "PerProjectPerRegion"
            infos.append({"name": f"projects/{project}/locations/global/services/aiplatform.googleapis.com/"
                                  f"quotaInfos/{quota_id}",
                          "quotaId": quota_id, "metric": f"aiplatform.googleapis.com/{metric}",
                          "service": "aiplatform.googleapis.com", "isPrecise": True, "containerType": "PROJECT",
                          "dimensions": ["region"], "dimensionsInfos": entries})
        start = int(token or 0)
        size = page_size or 100
        result: dict[str, Any] = {"quotaInfos": infos[start:start + size]}
        if start + size < len(infos):
            result["nextPageToken"] = str(start + size)
        return result

    # -- the runner ----------------------------------------------------------------------

    def _run(self, name: str) -> None:
        time.sleep(0.01)
        with self.lock:
            job = self.jobs.get(name)
            if job is None or job.state != JobState.JOB_STATE_PENDING:
                return
            self.set_state(name, "RUNNING")
            job_id = name.rsplit("/", 1)[-1]
            replicas: list[tuple[str, Any]] = []
            for index, pool in enumerate(job.job_spec.worker_pool_specs):
                for replica in range(pool.replica_count):
                    replicas.append((f"workerpool{index}-{replica}", pool.container_spec))
            procs, readers = [], []
            for task, container in replicas:  # started under the lock, so cancel sees every process
                image = self.images.get(container.image_uri)
                if image is None:
                    self.set_state(name, "FAILED", f"Unable to pull image {container.image_uri}: not found.")
                    return
                argv = list(container.command or image.entrypoint) + list(container.args)
                defined: dict[str, str] = {}  # Vertex expands each env value against those before it
                for e in container.env:
                    defined[e.name] = expand(e.value, defined)
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **image.env, **defined}
                proc = subprocess.Popen(argv, cwd=image.workdir, env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
                procs.append((task, proc))
                reader = threading.Thread(target=self._pump, args=(job_id, task, proc), daemon=True)
                reader.start()
                readers.append(reader)
            self.processes[name] = [p for _, p in procs]
        failed = None
        for (task, proc), reader in zip(procs, readers, strict=True):
            code = proc.wait()
            reader.join()
            if code != 0 and failed is None:
                failed = (task, 128 - code if code < 0 else code)
        with self.lock:
            cancelling = self.jobs.get(name) is not None and self.jobs[name].state == JobState.JOB_STATE_CANCELLING
            if name not in self.jobs:
                return
            if cancelling:
                self.set_state(name, "CANCELLED")
            elif failed:
                self.set_state(name, "FAILED", f"The replica {failed[0]} exited with a non-zero status of {failed[1]}. "
                                               "Termination reason: Error. To find out more about why your job exited "
                                               "please check the logs.")
            else:
                self.set_state(name, "SUCCEEDED")

    def _pump(self, job_id: str, task: str, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            self.log(job_id, task, raw.decode("utf-8", "replace").removesuffix("\n"))


def _tokens(text: str) -> list[str]:
    tokens = re.findall(r'\(|\)|\bAND\b|\bOR\b|[\w.-]+\s*(?:>=|<=|=|:)\s*"[^"]*"', text)
    if re.sub(r'\(|\)|\bAND\b|\bOR\b|[\w.-]+\s*(?:>=|<=|=|:)\s*"[^"]*"|\s', "", text):
        raise ApiError(400, f"Invalid filter: {text!r}")
    return tokens


def _parse(tokens: list[str], term: Any) -> Any:
    """AIP-160 subset: terms, AND, OR, parentheses (AND binds tighter)."""
    pos = 0

    def or_expr() -> Any:
        nonlocal pos
        parts = [and_expr()]
        while pos < len(tokens) and tokens[pos] == "OR":
            pos += 1
            parts.append(and_expr())
        return lambda x: any(p(x) for p in parts)

    def and_expr() -> Any:
        nonlocal pos
        parts = [atom()]
        while pos < len(tokens) and tokens[pos] == "AND":
            pos += 1
            parts.append(atom())
        return lambda x: all(p(x) for p in parts)

    def atom() -> Any:
        nonlocal pos
        if pos >= len(tokens):
            raise ApiError(400, "Invalid filter: unexpected end")
        token = tokens[pos]
        pos += 1
        if token == "(":
            inner = or_expr()
            if pos >= len(tokens) or tokens[pos] != ")":
                raise ApiError(400, "Invalid filter: missing )")
            pos += 1
            return inner
        match = re.fullmatch(r'([\w.-]+)\s*(>=|<=|=|:)\s*"([^"]*)"', token)
        if not match:
            raise ApiError(400, f"Invalid filter term {token!r}")
        return term(*match.groups())

    if not tokens:
        return lambda x: True
    result = or_expr()
    if pos != len(tokens):
        raise ApiError(400, "Invalid filter: trailing tokens")
    return result


def parse_filter(text: str) -> Any:
    def term(key: str, op: str, value: str) -> Any:
        if not key.startswith("labels.") or op != "=":
            raise ApiError(400, f"Unsupported filter term {key}{op}")
        label = key.removeprefix("labels.")
        return lambda labels: labels.get(label) == value

    return _parse(_tokens(text), term)


def parse_log_filter(text: str) -> Any:
    def term(key: str, op: str, value: str) -> Any:
        path = key.split(".")

        def get(entry: dict[str, Any]) -> Any:
            node: Any = entry
            for part in path:
                node = node.get(part) if isinstance(node, dict) else None
            return node

        if op == "=":
            return lambda e: get(e) == value
        if op == ">=":
            return lambda e: (get(e) or "") >= value
        raise ApiError(400, f"Unsupported log filter {key}{op}")

    return _parse(_tokens(text), term)


class _Handler(BaseHTTPRequestHandler):
    vertex: FakeVertex
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, payload: Any) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _job(self, job: aiplatform_v1.CustomJob) -> bytes:
        return aiplatform_v1.CustomJob.to_json(job, use_integers_for_enums=True).encode()

    def _dispatch(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = urllib.parse.parse_qs(url.query)
        fake = self.vertex
        body = self._body() if method == "POST" else b""
        try:
            if path == "/v2/entries:list" and method == "POST":
                return self._send(200, fake.entries_list(json.loads(body or b"{}")))
            match = re.fullmatch(r"/v1/projects/([^/]+)/locations/global/services/aiplatform.googleapis.com/quotaInfos",
                                 path)
            if match and method == "GET":
                fake.calls["quotas"] += 1
                return self._send(200, fake.quota_infos(match.group(1), int(query.get("pageSize", ["0"])[0]),
                                                        query.get("pageToken", [""])[0]))
            match = re.fullmatch(r"/v1/(projects/[^/]+/locations/[^/]+)/customJobs", path)
            if match and method == "POST":
                fake.calls["create"] += 1
                return self._send(200, self._job(fake.create(match.group(1), body.decode())))
            if match and method == "GET":
                fake.calls["list"] += 1
                page, token = fake.list(match.group(1), query.get("filter", [""])[0],
                                        int(query.get("pageSize", ["0"])[0]), query.get("pageToken", [""])[0])
                jobs = [json.loads(self._job(j)) for j in page]
                return self._send(200, {"customJobs": jobs, **({"nextPageToken": token} if token else {})})
            match = re.fullmatch(r"/v1/(projects/[^/]+/locations/[^/]+/customJobs/[^/:]+)(:cancel)?", path)
            if match and method == "POST" and match.group(2):
                fake.calls["cancel"] += 1
                fake.cancel(match.group(1))
                return self._send(200, {})
            if match and method == "GET":
                fake.calls["get"] += 1
                return self._send(200, self._job(fake.get(match.group(1))))
            if match and method == "DELETE":
                fake.calls["delete"] += 1
                fake.get(match.group(1))
                fake.forget(match.group(1))
                return self._send(200, {"name": match.group(1) + "/operations/1", "done": True})
            raise ApiError(404, f"No such method: {method} {path}")
        except ApiError as exc:
            self._send(exc.code, {"error": {"code": exc.code, "message": exc.message,
                                            "status": STATUS_NAMES.get(exc.code, "UNKNOWN")}})
        except Exception as exc:  # noqa: BLE001  (a bug in this fake: a 400 the client does not retry for minutes)
            self._send(400, {"error": {"code": 400, "message": f"fake_vertex bug: {type(exc).__name__}: {exc}",
                                       "status": "INVALID_ARGUMENT"}})

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")
