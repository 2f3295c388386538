"""``xk8s.Kubernetes``: where and how a job runs on a Kubernetes cluster.

Every field is checked when the executor is written, so a typo fails in the launch script,
not after a submission. Fields left unset take the target's defaults (``xk8s.targets``).
Resources come from ``requirements`` (XManager's ``JobRequirements``): CPUs, memory,
ephemeral storage and one accelerator type, which becomes ``nvidia.com/gpu`` (GPUs, with
GKE's accelerator node selector) or ``google.com/tpu`` (TPUs, with GKE's TPU accelerator
and topology node selectors).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import attrs

from xcore import plugin as xp

# RFC 1123 names (namespaces, secrets, service accounts, volumes, queues) and label values.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_TOPOLOGY = re.compile(r"[1-9][0-9]*(x[1-9][0-9]*){1,2}")


def _fail(instance: Any, field: str, value: Any, what: str) -> None:
    raise xp.ConfigurationError(f"{type(instance).__name__}({field}={value!r}): {what}")


def _name(pattern: re.Pattern[str], limit: int, what: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is None:
            return
        if not isinstance(value, str) or len(value) > limit or not pattern.fullmatch(value):
            _fail(instance, attribute.name, value, what)

    return check


_dns_label = _name(_DNS_LABEL, 63, "must be a DNS label: lower-case letters, digits and '-', at most 63 characters.")
_dns_subdomain = _name(_DNS_SUBDOMAIN, 253, "must be a DNS name: lower-case letters, digits, '-' and '.'.")


def _positive_or_none(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        _fail(instance, attribute.name, value, "must be a whole number >= 1 (or None).")


def _non_negative(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        _fail(instance, attribute.name, value, "must be a whole number >= 0.")


def _labels(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    for key, item in value.items():
        if not isinstance(key, str) or not _LABEL_KEY.fullmatch(key) or len(key.rsplit("/", 1)[-1]) > 63:
            _fail(instance, attribute.name, value, f"{key!r} is not a valid label key.")
        if not isinstance(item, str) or len(item) > 63 or not _LABEL_VALUE.fullmatch(item):
            _fail(instance, attribute.name, value, f"{item!r} (for {key!r}) is not a valid label value "
                  "(at most 63 letters, digits, '-', '_', '.').")


@attrs.frozen(kw_only=True)
class Toleration:
    """A pod toleration: ``Toleration(key="nvidia.com/gpu", effect="NoSchedule")``."""

    key: str | None = None
    operator: str = attrs.field(default="Exists")
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = attrs.field(default=None, validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        if self.operator not in ("Exists", "Equal"):
            _fail(self, "operator", self.operator, "must be 'Exists' or 'Equal'.")
        if self.operator == "Exists" and self.value is not None:
            _fail(self, "value", self.value, "must be None with operator='Exists'.")
        if self.effect not in (None, "NoSchedule", "PreferNoSchedule", "NoExecute"):
            _fail(self, "effect", self.effect, "must be None, 'NoSchedule', 'PreferNoSchedule' or 'NoExecute'.")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            _fail(self, "toleration_seconds", self.toleration_seconds, "only applies to effect='NoExecute'.")

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operator": self.operator}
        for name, key in (("key", "key"), ("value", "value"), ("effect", "effect"),
                          ("toleration_seconds", "tolerationSeconds")):
            if getattr(self, name) is not None:
                out[key] = getattr(self, name)
        return out


_VOLUME_SOURCES = ("pvc", "secret", "config_map", "empty_dir", "host_path")


@attrs.frozen(kw_only=True)
class Volume:
    """A volume mounted into the container; exactly one source.

    ``Volume(name="data", mount_path="/data", pvc="datasets", read_only=True)``;
    sources: ``pvc`` (claim name), ``secret``, ``config_map``, ``empty_dir=True``
    (``medium="Memory"`` for /dev/shm), ``host_path``.
    """

    name: str = attrs.field(validator=_dns_label)
    mount_path: str
    pvc: str | None = attrs.field(default=None, validator=_dns_subdomain)
    secret: str | None = attrs.field(default=None, validator=_dns_subdomain)
    config_map: str | None = attrs.field(default=None, validator=_dns_subdomain)
    empty_dir: bool = False
    medium: str | None = None
    host_path: str | None = None
    read_only: bool = False
    sub_path: str | None = None

    def __attrs_post_init__(self) -> None:
        given = [s for s in _VOLUME_SOURCES if getattr(self, s) not in (None, False)]
        if len(given) != 1:
            _fail(self, "name", self.name,
                  f"give exactly one source of {', '.join(_VOLUME_SOURCES)}; got {given or 'none'}.")
        if not isinstance(self.mount_path, str) or not self.mount_path.startswith("/") or ":" in self.mount_path:
            _fail(self, "mount_path", self.mount_path, "must be an absolute path without ':'.")
        if self.medium not in (None, "", "Memory"):
            _fail(self, "medium", self.medium, "must be None or 'Memory'.")

    def source(self) -> dict[str, Any]:
        if self.pvc:
            return {"persistentVolumeClaim": {"claimName": self.pvc, "readOnly": self.read_only}}
        if self.secret:
            return {"secret": {"secretName": self.secret}}
        if self.config_map:
            return {"configMap": {"name": self.config_map}}
        if self.host_path:
            return {"hostPath": {"path": self.host_path}}
        return {"emptyDir": {"medium": self.medium} if self.medium else {}}

    def mount(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "mountPath": self.mount_path, "readOnly": self.read_only}
        if self.sub_path:
            out["subPath"] = self.sub_path
        return out


def _secret_refs(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    for var, ref in value.items():
        if not isinstance(var, str) or not _ENV_NAME.fullmatch(var):
            _fail(instance, attribute.name, value, f"{var!r} is not a valid environment variable name.")
        secret, _, key = str(ref).partition("/")
        if not key or not _DNS_SUBDOMAIN.fullmatch(secret) or not re.fullmatch(r"[-._a-zA-Z0-9]+", key):
            _fail(instance, attribute.name, value, f"{var}: write the source as 'SECRET/KEY', got {ref!r}.")


def _tolerations(value: Any) -> list[Toleration]:
    return [t if isinstance(t, Toleration) else Toleration(**t) for t in value]


def _volumes(value: Any) -> list[Volume]:
    return [v if isinstance(v, Volume) else Volume(**v) for v in value]


def _str_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value]


@attrs.frozen
class KubernetesSpec(xp.ExecutorSpec):
    """What ``experiment.package`` packages for: ``xk8s.Kubernetes.Spec()``.

    ``registry`` (else the target's ``registry``, else ``XK8S_REGISTRY``) is where images
    built from ``xm.python_container`` / ``xm.dockerfile_container`` are pushed, tagged by
    content. ``push_image_tag`` (XManager's name): a full reference the image is also pushed
    as, and which the pods then run.
    """

    target: str | None = None
    registry: str | None = None
    push_image_tag: str | None = None


def _requirements(value: Any) -> xp.JobRequirements:
    """A named converter (mypy's attrs plugin does not follow the ``to_requirements`` alias)."""
    return xp.to_requirements(value)


@attrs.define(kw_only=True)
class Kubernetes(xp.Executor):
    """Run jobs as Kubernetes Jobs (a sweep as one Indexed Job, a JobGroup as a JobSet).

    ``target`` names an entry of ``k8s.toml`` (kubeconfig context plus defaults); ``context``
    a kubeconfig context directly. ``retry=xm.Retry(...)`` becomes per-trial
    ``backoffLimitPerIndex`` and a pod failure policy (docs/long-runs.md); ``retries=N``, when
    set, overrides its limit and counts every failure but a disruption.
    ``checkpoint_volume`` names the volume ``XCORE_CHECKPOINT_DIR`` is on; a ``retry=`` policy that retries needs
    one (the default policy does not). ``time_limit_secs`` bounds each trial
    (the pod's ``activeDeadlineSeconds``), not the whole sweep. ``max_parallel`` caps the pods of a sweep that run
    at once (``parallelism``).

    A JobGroup's roles learn each other's pod DNS names (``XCORE_JOB_HOSTS``,
    ``XCORE_HOST_<ROLE>``); ``distributed=xm.Distributed(...)`` gives each replica of a role
    its framework's variables (a replicated or distributed single job runs as a JobSet of one
    role). See docs/gangs.md.
    """

    Spec: ClassVar[type[xp.ExecutorSpec]] = KubernetesSpec
    # XManager's field, by position too (``xm_local.Kubernetes(requirements)``); the rest keyword-only
    requirements: xp.JobRequirements = attrs.field(factory=xp.JobRequirements, converter=_requirements,
                                                   kw_only=False)

    target: str | None = None
    context: str | None = None
    namespace: str | None = attrs.field(default=None, validator=_dns_label)
    node_selector: dict[str, str] = attrs.field(factory=dict, validator=_labels)
    tolerations: list[Toleration] = attrs.field(factory=list, converter=_tolerations)
    service_account: str | None = attrs.field(default=None, validator=_dns_subdomain)
    image_pull_secrets: list[str] = attrs.field(factory=list, converter=_str_list)
    priority_class: str | None = attrs.field(default=None, validator=_dns_subdomain)
    queue: str | None = attrs.field(default=None, validator=_dns_subdomain)
    workload_priority: str | None = attrs.field(default=None, validator=_dns_subdomain)
    time_limit_secs: int | None = attrs.field(default=None, validator=_positive_or_none)
    retries: int = attrs.field(default=0, validator=_non_negative)
    ttl_after_finished_secs: int | None = attrs.field(default=None, validator=_non_negative)
    env_from_secrets: dict[str, str] = attrs.field(factory=dict, validator=_secret_refs)
    volumes: list[Volume] = attrs.field(factory=list, converter=_volumes)
    max_parallel: int | None = attrs.field(default=None, validator=_positive_or_none)
    labels: dict[str, str] = attrs.field(factory=dict, validator=_labels)
    image_pull_policy: str | None = None
    distributed: xp.Distributed | None = attrs.field(default=None, converter=xp.to_distributed)
    #: The name of one of ``volumes`` (a PVC, say) that survives attempts: each work unit gets
    #: ``XCORE_CHECKPOINT_DIR=<its mount path>/checkpoints/<experiment>/<work unit>`` there.
    #: Required by a ``retry=`` policy that retries (``max_attempts > 1``).
    checkpoint_volume: str | None = None
    #: Whether a single job or JobGroup with a ``retry=`` policy gets ``XCORE_ATTEMPT``, added
    #: up at pod start by ``/bin/sh`` (``manifests.attempt_command``). False for an image without
    #: a shell: its program gets the parts only (``XK8S_FIRST_ATTEMPT`` and the counts).
    attempt_env: bool = True

    def __attrs_post_init__(self) -> None:
        for secret in self.image_pull_secrets:
            if not _DNS_SUBDOMAIN.fullmatch(secret):
                _fail(self, "image_pull_secrets", self.image_pull_secrets, f"{secret!r} is not a valid secret name.")
        if self.image_pull_policy not in (None, "Always", "IfNotPresent", "Never"):
            _fail(self, "image_pull_policy", self.image_pull_policy, "must be 'Always', 'IfNotPresent' or 'Never'.")
        names = [v.name for v in self.volumes]
        if len(set(names)) != len(names):
            _fail(self, "volumes", names, "volume names must be unique.")
        if self.checkpoint_volume is not None:
            volume = next((v for v in self.volumes if v.name == self.checkpoint_volume), None)
            if volume is None or volume.read_only:
                _fail(self, "checkpoint_volume", self.checkpoint_volume,
                      f"name one of volumes that is not read-only ({', '.join(names) or 'none given'}).")
        if isinstance(self.retry, xp.Retry) and self.retry.max_attempts > 1 and self.checkpoint_volume is None:
            # also at experiment.add for a job's own retry= (the core copies it onto the executor)
            _fail(self, "retry", self.retry, "a policy that retries needs a volume that outlives pods for "
                  "XCORE_CHECKPOINT_DIR: add volumes=[xk8s.Volume(name='ckpt', mount_path='/ckpt', pvc=CLAIM)] "
                  "and checkpoint_volume='ckpt' (or retry=xm.Retry(max_attempts=1)).")
        topology = tpu_topology(self.requirements)
        if topology is not None and not _TOPOLOGY.fullmatch(topology):
            _fail(self, "requirements", self.requirements, f"topology {topology!r} must read like '2x4' or '4x4x4'.")

    def group_key(self) -> str:
        """Executors with equal keys (and the same executable) share one Indexed Job."""
        return repr(self)


def tpu_topology(requirements: xp.JobRequirements) -> str | None:
    """The TPU slice shape XManager-style requirements give (``tpu_v5e='2x4'``), for GKE's
    topology selector; None for a plain chip count or a non-TPU accelerator."""
    accelerator, topology = requirements.accelerator, requirements.topology
    if accelerator is None or not accelerator.is_tpu or topology is None or len(topology.dimensions) < 2:
        return None
    return str(topology.name)
