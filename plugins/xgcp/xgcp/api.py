"""Thin, lazily imported access to Vertex AI (aiplatform_v1 JobServiceClient over REST) and
to Cloud Logging's ``entries:list`` (plain REST with the same credentials).

Every Google import happens inside a function: ``import xgcp`` stays cheap.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from xcore import plugin as xp
from xgcp import config

BACKOFF_BASE_SECS = 1.0  # first wait after a quota (429) or transient error; doubles each time
BACKOFF_MAX_SECS = 32.0
RETRY_BUDGET_SECS = 300.0  # give up on a create after this long
_clients: dict[str, Any] = {}
_lock = threading.Lock()


class VertexError(xp.XcoreError):
    """Vertex or Cloud Logging answered with an error, worded as what to do."""


def client(location: str, target: config.Target | None = None) -> Any:
    endpoint = config.api_endpoint(location, target)
    with _lock:
        if endpoint not in _clients:
            from google.cloud import aiplatform_v1

            _clients[endpoint] = aiplatform_v1.JobServiceClient(
                transport="rest", credentials=config.credentials(endpoint), client_options={"api_endpoint": endpoint})
        return _clients[endpoint]


def parent(project: str, location: str) -> str:
    return f"projects/{project}/locations/{location}"


def _errors() -> Any:
    from google.api_core import exceptions

    return exceptions


def is_retryable(exc: BaseException) -> bool:
    """Quota (429 / RESOURCE_EXHAUSTED) and transient server or network errors."""
    ex = _errors()
    import requests

    return isinstance(exc, (ex.TooManyRequests, ex.ResourceExhausted, ex.ServiceUnavailable, ex.InternalServerError,
                            ex.GatewayTimeout, ex.DeadlineExceeded, requests.ConnectionError, requests.Timeout))


def explain(exc: BaseException, project: str, endpoint: str = "") -> str:
    """One sentence that says what happened and what to run."""
    ex = _errors()
    import requests
    from google.auth import exceptions as auth_errors

    if isinstance(exc, auth_errors.GoogleAuthError):  # e.g. a refresh after a 401 failed: expired login
        return "Google rejected the credentials: run `gcloud auth application-default login`."
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        where = endpoint or "the Vertex AI endpoint"
        return (f"Cannot reach {where} ({type(exc).__name__}): check the location in the target "
                "(`xcore vertex list`) and your network or proxy settings.")
    text = re.sub(r"^(GET|POST|DELETE|PATCH|PUT) \S+: ", "", getattr(exc, "message", None) or str(exc))
    if isinstance(exc, (ex.PermissionDenied, ex.Forbidden, ex.NotFound)) and (
            "may not exist" in text or f"project {project} not found" in text.lower()
            or "project not found" in text.lower()):
        return (f"Project {project} does not exist or you cannot see it: check the id with "
                f"`gcloud projects describe {project}` (or set project in vertex.toml).")
    if isinstance(exc, (ex.TooManyRequests, ex.ResourceExhausted)):
        return (f"Vertex quota exceeded in project {project} ({text}); request more quota in the Cloud console "
                "(IAM & Admin > Quotas) or lower Vertex(create_parallelism=...).")
    if isinstance(exc, (ex.PermissionDenied, ex.Forbidden)):
        if "SERVICE_DISABLED" in repr(getattr(exc, "details", "")) or "has not been used" in text or "disabled" in text:
            return (f"The Vertex AI API is not enabled in project {project}: run "
                    f"`gcloud services enable aiplatform.googleapis.com --project {project}`.")
        return (f"Permission denied in project {project} ({text}): grant your account roles/aiplatform.user, e.g. "
                f"`gcloud projects add-iam-policy-binding {project} --member=user:YOU --role=roles/aiplatform.user`.")
    if isinstance(exc, (ex.Unauthenticated, ex.Unauthorized)):
        return "Google rejected the credentials: run `gcloud auth application-default login`."
    if isinstance(exc, ex.NotFound):
        return f"Not found in project {project} ({text}): check the project and location (`xcore vertex check`)."
    if isinstance(exc, (ex.InvalidArgument, ex.BadRequest)):
        return f"Vertex rejected the request: {text}"
    return f"{type(exc).__name__}: {text}"


def message(body: dict[str, Any]) -> Any:
    from google.cloud import aiplatform_v1

    return aiplatform_v1.CustomJob(body)


def find_by_request(api: Any, project: str, location: str, request_id: str) -> Any | None:
    jobs = list(api.list_custom_jobs(request={"parent": parent(project, location),
                                              "filter": f'labels.xcore_request="{request_id}"'}))
    return jobs[0] if jobs else None


def create(api: Any, project: str, location: str, body: dict[str, Any], request_id: str,
           calls: Callable[[str], None] = lambda kind: None, sleep: Callable[[float], None] = time.sleep) -> Any:
    """Create one CustomJob, backing off on quota and transient errors. Before each retry the
    job's ``xcore_request`` label is looked up, so a create whose answer was lost is never
    repeated."""
    deadline = time.monotonic() + RETRY_BUDGET_SECS
    delay = BACKOFF_BASE_SECS
    job = message(body)
    check_first = False
    while True:
        try:
            if check_first:
                calls("list")
                found = find_by_request(api, project, location, request_id)
                if found is not None:
                    return found
            calls("create")
            return api.create_custom_job(parent=parent(project, location), custom_job=job)
        except Exception as exc:
            if not is_retryable(exc) or time.monotonic() + delay > deadline:
                raise
        check_first = True
        sleep(delay * random.uniform(0.5, 1.0))
        delay = min(delay * 2, BACKOFF_MAX_SECS)


def list_jobs(api: Any, project: str, location: str, filter_: str) -> dict[str, Any]:
    pages = api.list_custom_jobs(request={"parent": parent(project, location), "filter": filter_, "page_size": 1000})
    return {job.name: job for job in pages}


def logging_error(status: int, text: str, project: str) -> str:
    """What a failed Cloud Logging read means, as one sentence with what to run."""
    if status == 401:
        return "Google rejected the credentials: run `gcloud auth application-default login`."
    if status == 403 and ("SERVICE_DISABLED" in text or "has not been used" in text or "is disabled" in text):
        return (f"The Cloud Logging API is not enabled in project {project}: run "
                f"`gcloud services enable logging.googleapis.com --project {project}`.")
    if status == 403:
        return (f"Permission denied reading logs in project {project}: grant roles/logging.viewer, e.g. "
                f"`gcloud projects add-iam-policy-binding {project} --member=user:YOU --role=roles/logging.viewer`.")
    return (f"Cloud Logging answered {status} ({text[:200]}); try again, or read the logs in the Cloud console "
            f"(Logging > Logs Explorer, project {project}).")


EXIT_RE = re.compile(r"replica (workerpool(\d+)-\d+) exited with a non-zero status of (-?\d+)")


def log_entries(project: str, job_id: str, pool: int, target: config.Target | None = None,
                follow: bool = False, finished: Callable[[], bool] = lambda: True,
                poll_secs: float = 1.0) -> Iterator[str]:
    """Lines a job's replica 0 of ``pool`` logged, oldest first; following polls with a cursor
    (the last timestamp and the entries seen at it) until ``finished()`` and one more read."""
    endpoint = config.logging_endpoint(target)
    from google.auth.transport.requests import AuthorizedSession

    session = AuthorizedSession(config.credentials(endpoint))
    base = (f'resource.type="ml_job" AND resource.labels.job_id="{job_id}" '
            f'AND resource.labels.task_name="workerpool{pool}-0"')
    cursor, seen = "", set[str]()
    settle = 0.0 if config.is_emulator(endpoint) else 10.0  # Cloud Logging ingests with a delay
    done_at: float | None = None
    while True:
        token = None
        while True:
            body: dict[str, Any] = {
                "resourceNames": [f"projects/{project}"], "orderBy": "timestamp asc", "pageSize": 1000,
                "filter": base + (f' AND timestamp>="{cursor}"' if cursor else ""),
            }
            if token:
                body["pageToken"] = token
            try:
                response = session.post(f"{endpoint}/v2/entries:list", json=body, timeout=60)
            except Exception as exc:  # noqa: BLE001  (refused credentials, network: one sentence)
                raise VertexError(explain(exc, project, endpoint)) from None
            if response.status_code != 200:
                raise VertexError(logging_error(response.status_code, response.text, project))
            data = response.json()
            for entry in data.get("entries", []):
                key = entry.get("insertId") or repr(entry)
                if key in seen:
                    continue
                if entry.get("timestamp", "") > cursor:
                    cursor, seen = entry["timestamp"], set()
                seen.add(key)
                text = entry.get("textPayload")
                if text is None:
                    text = str(entry.get("jsonPayload", {}).get("message", entry.get("jsonPayload", "")))
                yield text if text.endswith("\n") else text + "\n"
            token = data.get("nextPageToken")
            if not token:
                break
        if not follow:
            return
        if done_at is not None and time.monotonic() >= done_at:
            return
        if done_at is None and finished():
            done_at = time.monotonic() + settle  # read once more after the job ended
            continue
        time.sleep(poll_secs)
