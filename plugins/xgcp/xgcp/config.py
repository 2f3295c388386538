"""Vertex targets, read from ``vertex.toml`` in the xcore config directory, and the endpoints
and credentials a process uses to reach Vertex AI and Cloud Logging.

Example (``~/.config/xcore/vertex.toml``; ``XCORE_CONFIG_DIR`` moves it)::

    default = "dev"                    # XGCP_TARGET overrides it

    [targets.dev]
    project = "my-project"
    location = "us-central1"
    registry = "us-central1-docker.pkg.dev/my-project/xcore"   # where images are pushed
    staging_bucket = "gs://my-bucket/xcore"
    service_account = "trainer@my-project.iam.gserviceaccount.com"

    [targets.dev.defaults]             # used when the executor leaves them unset: labels, network, service_account
    network = "projects/123/global/networks/default"
    labels = { team = "ml" }

Without a file, ``GOOGLE_CLOUD_PROJECT`` and ``XGCP_LOCATION`` (default ``us-central1``) name the
project and location. ``XGCP_API_ENDPOINT`` / ``XGCP_LOGGING_ENDPOINT`` / ``XGCP_QUOTAS_ENDPOINT``
(Cloud Quotas, read by ``xcore vertex check``) point at other endpoints
(an ``http://`` endpoint is a local emulator and gets anonymous credentials).
Credentials are Application Default Credentials: ``gcloud auth application-default login``,
a key file in ``GOOGLE_APPLICATION_CREDENTIALS``, or impersonation configured through gcloud.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import attrs

from xcore import plugin as xp

FILE_NAME = "vertex.toml"
ENV_TARGET = "XGCP_TARGET"
ENV_API = "XGCP_API_ENDPOINT"
ENV_LOGGING = "XGCP_LOGGING_ENDPOINT"
ENV_QUOTAS = "XGCP_QUOTAS_ENDPOINT"
DEFAULT_LOCATION = "us-central1"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


@attrs.frozen
class Target:
    name: str
    project: str
    location: str = DEFAULT_LOCATION
    registry: str | None = None
    staging_bucket: str | None = None
    service_account: str | None = None
    api_endpoint: str | None = None
    logging_endpoint: str | None = None
    quotas_endpoint: str | None = None
    defaults: dict[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def config_path() -> Path:
    return xp.config_dir() / FILE_NAME


def load_targets() -> tuple[dict[str, Target], str | None]:
    path = config_path()
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return {}, None
    except tomllib.TOMLDecodeError as exc:
        raise xp.ConfigurationError(f"{path}: {exc}; fix the TOML syntax.") from None
    targets: dict[str, Target] = {}
    fields = {f.name for f in attrs.fields(Target)} - {"name"}
    for name, table in (data.get("targets") or {}).items():
        unknown = set(table) - fields
        if unknown:
            raise xp.ConfigurationError(
                f"{path}: target {name!r} has unknown keys {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(fields))}.")
        if "project" not in table:
            raise xp.ConfigurationError(f"{path}: target {name!r} needs project = \"...\".")
        _check_defaults(path, name, table.get("defaults") or {})
        targets[name] = Target(name=name, **table)
    default = data.get("default")
    if default is not None and default not in targets:
        raise xp.ConfigurationError(f"{path}: default = {default!r} names no [targets.{default}] table.")
    return targets, default


DEFAULT_FIELDS = ("labels", "network", "service_account")  # the executor fields a target's defaults fill in


def _check_defaults(path: Path, name: str, defaults: dict[str, Any]) -> None:
    """Defaults xgcp would ignore or Vertex would reject fail here, naming the file."""
    from xgcp.executors import _check_labels

    unknown = sorted(set(defaults) - set(DEFAULT_FIELDS))
    if unknown:
        raise xp.ConfigurationError(
            f"{path}: [targets.{name}.defaults] has {', '.join(unknown)}, which xgcp does not read; "
            f"defaults may set {', '.join(DEFAULT_FIELDS)} (set other fields on xgcp.Vertex(...)).")
    try:
        _check_labels(None, None, dict(defaults.get("labels") or {}))
    except xp.ConfigurationError as exc:
        raise xp.ConfigurationError(f"{path}: [targets.{name}.defaults] {exc}") from None


def resolve(name: str | None = None, project: str | None = None, location: str | None = None) -> Target:
    """The target a job uses: ``name``, else XGCP_TARGET, else the file's default, else the
    environment (GOOGLE_CLOUD_PROJECT). Explicit ``project``/``location`` override the target's."""
    targets, default = load_targets()
    chosen = name or os.environ.get(ENV_TARGET) or default
    if chosen:
        if chosen not in targets:
            raise xp.ConfigurationError(
                f"Vertex target {chosen!r} is not in {config_path()}; add [targets.{chosen}] with a project.")
        target = targets[chosen]
    else:
        env_project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("CLOUDSDK_CORE_PROJECT")
        if not env_project:
            raise xp.ConfigurationError(
                f"No Google Cloud project: pass Vertex(project=...), set GOOGLE_CLOUD_PROJECT, or add a target to "
                f"{config_path()}.")
        target = Target(name="env", project=env_project, location=os.environ.get("XGCP_LOCATION", DEFAULT_LOCATION))
    return attrs.evolve(target, project=project or target.project, location=location or target.location)


def api_endpoint(location: str, target: Target | None = None) -> str:
    return os.environ.get(ENV_API) or (target and target.api_endpoint) or f"{location}-aiplatform.googleapis.com"


def logging_endpoint(target: Target | None = None) -> str:
    return os.environ.get(ENV_LOGGING) or (target and target.logging_endpoint) or "https://logging.googleapis.com"


def quotas_endpoint(target: Target | None = None) -> str:
    return os.environ.get(ENV_QUOTAS) or (target and target.quotas_endpoint) or "https://cloudquotas.googleapis.com"


def is_emulator(endpoint: str) -> bool:
    return endpoint.startswith("http://")


def credentials(endpoint: str) -> Any:
    """Anonymous for a local emulator, else Application Default Credentials."""
    if is_emulator(endpoint):
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        creds, _ = google.auth.default(scopes=SCOPES)
    except DefaultCredentialsError:
        key_file = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        if key_file and not os.path.isfile(key_file):
            raise xp.ConfigurationError(
                f"No Google credentials found: GOOGLE_APPLICATION_CREDENTIALS names {key_file}, which does not exist; "
                "fix the path, or unset it and run `gcloud auth application-default login`.") from None
        raise xp.ConfigurationError(
            "No Google credentials found: run `gcloud auth application-default login`, or set "
            "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file.") from None
    return creds
