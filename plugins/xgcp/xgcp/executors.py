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
