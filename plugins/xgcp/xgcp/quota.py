"""Vertex custom-training quota of a project in one region, read from the Cloud Quotas API
(``quotaInfos`` of ``aiplatform.googleapis.com``), for ``xcore vertex check``.

The API gives limits, not usage; a limit of 0 means the project must request quota before a
job can use that resource. Plain REST with the same credentials as Vertex (no extra client).
"""

from __future__ import annotations

from typing import Any

import attrs

from xcore import plugin as xp
from xgcp import config

SERVICE = "aiplatform.googleapis.com"
PREFIX = "custom_model_training_"
UNLIMITED = -1


class QuotaNotVisible(xp.XcoreError):
    """The Cloud Quotas API did not answer; the message says what to run."""


@attrs.frozen
class Quota:
    name: str  # the metric without its service and prefix: "cpus", "nvidia_t4_gpus"...
    limit: int  # -1: unlimited


def _limit(info: dict[str, Any], region: str) -> int | None:
    """The limit for ``region``: its own entry, else the entry without a region (the default)."""
    default = None
    for entry in info.get("dimensionsInfos", []):
        where = entry.get("dimensions", {}).get("region")
        value = int(entry.get("details", {}).get("value", 0))
        if where == region:
            return value
        if where is None:
            default = value
    return default


def _explain(status: int, text: str, project: str) -> str:
    if status in (401,):
        return "Google rejected the credentials: run `gcloud auth application-default login`."
    if status == 403 and ("SERVICE_DISABLED" in text or "has not been used" in text or "is disabled" in text):
        return (f"Quota not visible: the Cloud Quotas API is not enabled in project {project}: run "
                f"`gcloud services enable cloudquotas.googleapis.com --project {project}`.")
    if status == 403:
        return (f"Quota not visible: permission denied in project {project}; grant roles/cloudquotas.viewer, e.g. "
                f"`gcloud projects add-iam-policy-binding {project} --member=user:YOU "
                "--role=roles/cloudquotas.viewer`.")
    return f"Quota not visible: the Cloud Quotas API answered {status} ({text[:200]})."


def training_quotas(project: str, region: str, target: config.Target | None = None) -> list[Quota]:
    """Every custom-training quota of ``project`` that applies in ``region``, by name."""
    import requests
    from google.auth.transport.requests import AuthorizedSession

    endpoint = config.quotas_endpoint(target)
    session = AuthorizedSession(config.credentials(endpoint))
    url = f"{endpoint}/v1/projects/{project}/locations/global/services/{SERVICE}/quotaInfos"
    found: dict[str, int] = {}
    token = ""
    while True:
        try:
            params = {"pageSize": "500", "pageToken": token} if token else {"pageSize": "500"}
            response = session.get(url, params=params, timeout=60)
        except requests.RequestException as exc:
            raise QuotaNotVisible(f"Quota not visible: cannot reach {endpoint} ({type(exc).__name__}); "
                                  "check the network or proxy settings.") from None
        if response.status_code != 200:
            raise QuotaNotVisible(_explain(response.status_code, response.text, project))
        data = response.json()
        for info in data.get("quotaInfos", []):
            metric = str(info.get("metric", "")).rsplit("/", 1)[-1]
            limit = _limit(info, region)
            if metric.startswith(PREFIX) and limit is not None:
                name = metric.removeprefix(PREFIX)
                found[name] = limit if name not in found else max(found[name], limit)
        token = data.get("nextPageToken", "")
        if not token:
            break
    return [Quota(name, limit) for name, limit in sorted(found.items())]


def summary(quotas: list[Quota], region: str) -> str:
    """One line: the CPU quota, every accelerator with quota, and how many have none."""
    if not quotas:
        return f"no custom-training quota listed for {region}"

    def shown(q: Quota) -> str:
        return f"{q.name} {'unlimited' if q.limit == UNLIMITED else q.limit}"

    granted = [q for q in quotas if q.limit != 0]
    zero = [q for q in quotas if q.limit == 0]
    text = f"{region}: " + (", ".join(shown(q) for q in granted) or "nothing granted")
    if zero:
        text += f"; 0 for {len(zero)} more ({', '.join(q.name for q in zero[:3])}{'...' if len(zero) > 3 else ''})"
    return text


def warning(quotas: list[Quota], region: str, project: str) -> str | None:
    """A sentence when the project cannot run even a CPU job in the region."""
    cpus = next((q.limit for q in quotas if q.name == "cpus"), None)
    if cpus == 0:
        return (f"Project {project} has no custom-training CPU quota in {region}: request it in the Cloud console "
                f"(IAM & Admin > Quotas, metric aiplatform.googleapis.com/{PREFIX}cpus) or use another location.")
    return None
