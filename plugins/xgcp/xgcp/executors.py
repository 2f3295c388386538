"""The Vertex executor (XManager's names), its spec, what packaging produces and the job handle."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import attrs

from xcore import plugin as xp

LABEL_RE = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE_RE = re.compile(r"[a-z0-9_-]{0,63}")
STRATEGIES = ("standard", "spot", "flex-start")
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "pd-balanced", "hyperdisk-balanced")
RESERVED_LABEL_PREFIXES = ("xcore_", "xcore-")


def _check_labels(instance: Any, attribute: Any, labels: dict[str, str]) -> None:
    for key, value in labels.items():
        if not LABEL_RE.fullmatch(key) or not LABEL_VALUE_RE.fullmatch(str(value)):
            raise xp.ConfigurationError(
                f"Vertex label {key}={value!r}: keys start with a letter; keys and values use only lowercase "
                f"letters, digits, '-' and '_', at most 63 characters.")
        if key.startswith(RESERVED_LABEL_PREFIXES):
            raise xp.ConfigurationError(f"Vertex label {key!r}: labels starting with 'xcore_' are xcore's own.")
    if len(labels) > 60:
        raise xp.ConfigurationError("Vertex allows 64 labels per job and xcore uses 4: give at most 60.")


#: ``gs://BUCKET`` or ``gs://BUCKET/PREFIX``: Cloud Storage's bucket names (3 to 222 characters,
#: dotted parts of at most 63) and a prefix of non-empty folders, none ``.`` or ``..``.
_BUCKET = re.compile(r"gs://([a-z0-9][a-z0-9_.-]{1,220}[a-z0-9])((?:/[^/\x00-\x1f\x7f]+)*)/?")
FUSE_ROOT = "/gcs"  # where Vertex mounts every bucket the job's service account can read (Cloud Storage FUSE)


def _check_bucket(instance: Any, attribute: Any, value: str | None) -> None:
    if value is None:
        return
    found = _BUCKET.fullmatch(value) if isinstance(value, str) else None
    if (found is None or any(len(part) > 63 for part in found.group(1).split("."))
            or any(part in (".", "..") for part in found.group(2).split("/"))):
        raise xp.ConfigurationError(
            f"Vertex(checkpoint_bucket={value!r}): expected 'gs://BUCKET' or 'gs://BUCKET/PREFIX' (bucket names use "
            "lowercase letters, digits, '-', '_' and '.'; folders are not empty, '.' or '..').")


def fuse_path(location: str) -> str:
    """Where a ``gs://BUCKET/PREFIX`` location is inside a Vertex container: ``/gcs/BUCKET/PREFIX``."""
    return FUSE_ROOT + "/" + location.removeprefix("gs://").rstrip("/")


def _positive(instance: Any, attribute: Any, value: float | None) -> None:
    if value is not None and not value > 0:
        raise xp.ConfigurationError(f"Vertex({attribute.name}=...) must be > 0, got {value!r}.")


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(instance: Any, attribute: Any, value: str | None) -> None:
        if value is not None and value not in choices:
            raise xp.ConfigurationError(
                f"Vertex({attribute.name}={value!r}): use one of {', '.join(choices)}.")
    return check


def _pattern(regex: str, what: str) -> Any:
    compiled = re.compile(regex)

    def check(instance: Any, attribute: Any, value: str | None) -> None:
        if value is not None and not compiled.fullmatch(value):
            raise xp.ConfigurationError(f"Vertex({attribute.name}={value!r}): expected {what}.")
    return check


@attrs.frozen
class VertexSpec(xp.ExecutorSpec):
    """What ``experiment.package`` packages for. Images built from ``xm.python_container`` /
    ``xm.dockerfile_container`` go to ``registry`` (else the ``target``'s registry in
    ``vertex.toml``, else ``XGCP_REGISTRY``) tagged by content. ``push_image_tag``: a full
    reference the image is also pushed as and jobs then run (XManager's
    ``VertexSpec(push_image_tag=...)``); default: the content tag (``xgcp.packaging``)."""

    push_image_tag: str | None = None
    registry: str | None = None
    target: str | None = None


@attrs.frozen
class TensorboardCapability:
    """XManager's TensorBoard capability: a Vertex TensorBoard instance
    (``projects/P/locations/L/tensorboards/ID``) and the ``gs://`` directory jobs write to."""

    name: str = attrs.field(validator=_pattern(r"projects/[^/]+/locations/[^/]+/tensorboards/[^/]+",
                                               "projects/P/locations/L/tensorboards/ID"))
    base_output_directory: str = attrs.field(validator=_pattern(r"gs://.+", "a gs:// path"))


def _requirements(value: Any) -> xp.JobRequirements:
    """A named converter (mypy's attrs plugin does not follow the ``to_requirements`` alias)."""
    return xp.to_requirements(value)


@attrs.define(kw_only=True)
class Vertex(xp.Executor):
    """Runs each job as a Vertex AI CustomJob (a JobGroup as one CustomJob with worker pools).

    ``requirements`` picks the smallest machine that fits (``xgcp.machines``); ``machine_type``
    overrides it. Unset ``project``/``location``/``service_account``/``network`` come from the
    target in ``vertex.toml`` (``xgcp.config``). ``timeout_secs``: Vertex stops the job after it;
    ``scheduling``: "standard", "spot" or "flex-start" (``max_wait_secs``: how long flex-start
    may queue); ``create_parallelism``: concurrent create calls of a sweep.
    ``checkpoint_bucket``: ``gs://BUCKET/PREFIX`` where each work unit's ``XCORE_CHECKPOINT_DIR``
    is (``/gcs/BUCKET/PREFIX/checkpoints/<experiment>/<work unit>``, through Vertex's Cloud
    Storage FUSE mount); a job whose explicit ``retry=`` policy retries needs it.
    """

    Spec: ClassVar[type[xp.ExecutorSpec]] = VertexSpec
    # XManager's two fields, by position too (``xm_local.Vertex(requirements, tensorboard)``); the rest keyword-only
    requirements: xp.JobRequirements = attrs.field(factory=xp.JobRequirements, converter=_requirements,
                                                   kw_only=False)
    tensorboard: TensorboardCapability | None = attrs.field(default=None, kw_only=False)
    target: str | None = None
    project: str | None = None
    location: str | None = None
    service_account: str | None = attrs.field(default=None, validator=_pattern(r"[^@\s]+@[^@\s]+", "an email"))
    network: str | None = attrs.field(
        default=None,
        validator=_pattern(r"projects/[^/]+/global/networks/[^/]+", "projects/NUMBER/global/networks/NAME"))
    labels: dict[str, str] = attrs.field(factory=dict, validator=_check_labels)
    machine_type: str | None = None
    boot_disk_type: str | None = attrs.field(default=None, validator=_one_of(BOOT_DISK_TYPES))
    boot_disk_size_gb: int | None = None
    timeout_secs: float | None = attrs.field(default=None, validator=_positive)
    scheduling: str = attrs.field(default="standard", validator=_one_of(STRATEGIES))
    restart_job_on_worker_restart: bool = False
    max_wait_secs: float | None = attrs.field(default=None, validator=_positive)
    base_output_dir: str | None = attrs.field(default=None, validator=_pattern(r"gs://.+", "a gs:// path"))
    enable_web_access: bool = False
    create_parallelism: int = 8
    checkpoint_bucket: str | None = attrs.field(default=None, validator=_check_bucket)

    def __attrs_post_init__(self) -> None:
        from xgcp import machines

        if self.boot_disk_size_gb is not None and not 100 <= self.boot_disk_size_gb <= 64000:
            raise xp.ConfigurationError(
                f"Vertex(boot_disk_size_gb={self.boot_disk_size_gb}): Vertex takes 100 to 64000.")
        if self.max_wait_secs is not None and self.scheduling != "flex-start":
            raise xp.ConfigurationError("Vertex(max_wait_secs=...) applies to scheduling='flex-start' only.")
        if not 1 <= self.create_parallelism <= 64:
            raise xp.ConfigurationError("Vertex(create_parallelism=...) must be between 1 and 64.")
        if self.machine_type is None:
            machines.select_machine(self.requirements)  # a clear error now, not at launch
        elif self.machine_type not in machines.KNOWN_MACHINE_TYPES:
            raise xp.ConfigurationError(
                f"Vertex(machine_type={self.machine_type!r}) is not in xgcp's table (xgcp.machines); "
                "leave it unset to pick from requirements.")

    def check_policy(self, retry: xp.Retry) -> None:
        """A relaunched CustomJob starts on fresh machines: a policy that retries needs a bucket
        for the attempts to resume from (the default policy does not: it would refuse every
        launch that names no bucket)."""
        if retry.max_attempts > 1 and self.checkpoint_bucket is None:
            raise xp.ConfigurationError(
                f"Vertex: retry=Retry(max_attempts={retry.max_attempts}) relaunches the job on fresh machines, and "
                "this executor has nowhere to keep checkpoints; give Vertex(checkpoint_bucket='gs://BUCKET/PREFIX') "
                "(the job's XCORE_CHECKPOINT_DIR) or retry=xm.Retry(max_attempts=1).")

    def checkpoint_dir(self, experiment_id: int, work_unit_id: int) -> str | None:
        """The work unit's ``XCORE_CHECKPOINT_DIR`` inside the container (every attempt and every
        worker pool the same); None without ``checkpoint_bucket``."""
        if self.checkpoint_bucket is None:
            return None
        return xp.checkpoint_dir(fuse_path(self.checkpoint_bucket), experiment_id, work_unit_id)


@attrs.define(kw_only=True)
class VertexExecutable(xp.Executable):
    """A container image in a registry Vertex can pull. ``command`` overrides its entrypoint
    (empty: the image's own); job args are appended as container args, never through a shell."""

    image_uri: str
    command: list[str] = attrs.field(factory=list)


@attrs.define
class VertexHandle(xp.JobHandle):
    """One xcore job in a CustomJob (``pool``: its worker pool). ``store``/``experiment``
    are the label values status filters on."""

    project: str
    location: str
    name: str  # projects/P/locations/L/customJobs/ID
    pool: int = 0
    request: str = ""  # the xcore_request label: finds the job again if a create's answer was lost
    store: str = ""
    experiment: str = ""

    @property
    def job_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]


def console_url(project: str, location: str, job_id: str) -> str:
    return (f"https://console.cloud.google.com/vertex-ai/locations/{location}/training/{job_id}/cpu"
            f"?project={project}")
