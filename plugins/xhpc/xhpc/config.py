"""Named clusters, read from ``clusters.toml`` in the xcore config directory.

Example (``~/.config/xcore/clusters.toml``; ``XCORE_CONFIG_DIR`` moves it)::

    default = "uni"                 # optional; XCORE_CLUSTER overrides it

    [clusters.uni]
    host = "login.uni.example"      # no host (or local = true): run on this machine (login node)
    user = "alice"
    port = 22
    key = "~/.ssh/id_ed25519"
    known_hosts = "~/.ssh/known_hosts"   # host keys are always verified
    jump = "alice@gateway.uni.example:22"
    scheduler = "slurm"             # or "sge"
    staging = "/scratch/alice/xcore"
    max_array_size = 1001           # Slurm's MaxArraySize (SGE: max_aj_tasks)
    control_persist = 300           # idle seconds the shared SSH connection stays open (0: none)

    [clusters.uni.defaults]         # executor fields used when the executor leaves them unset
    partition = "gpu"
    account = "lab"
    modules = ["cuda/12.1"]

A cluster picks the executor's backend only through ``scheduler``; ``xhpc.Slurm`` on an
``sge`` cluster is an error that says so.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

import attrs

from xcore.plugin import ConfigurationError, config_dir

FILE_NAME = "clusters.toml"
ENV_CLUSTER = "XCORE_CLUSTER"
LOCAL = "local"  # the implicit login-node cluster used when no cluster is named or configured
SCHEDULERS = ("slurm", "sge")
_KEYS = {
    "host", "user", "port", "key", "known_hosts", "jump", "scheduler", "staging", "local",
    "max_array_size", "defaults", "singularity", "connect_timeout", "ssh", "control_persist",
}
SSH_CLIENTS = ("openssh", "paramiko")
_SAFE_PATH = re.compile(r"[^\s'\"\\$`]+")


@attrs.frozen
class Cluster:
    """One cluster entry. ``host is None`` (or ``local``) means: run commands on this machine."""

    name: str
    scheduler: str = "slurm"
    host: str | None = None
    user: str | None = None
    port: int = 22
    key: str | None = None
    known_hosts: str | None = None
    jump: str | None = None
    staging: str = "~/xcore-staging"
    local: bool = False
    max_array_size: int | None = None
    singularity: str = "singularity"
    connect_timeout: float = 15.0
    ssh: str = "openssh"  # or "paramiko" (also used when no `ssh` program is installed)
    control_persist: int = 300  # seconds an idle shared SSH connection stays open; 0: none kept
    defaults: dict[str, Any] = attrs.field(factory=dict)

    @property
    def is_local(self) -> bool:
        return self.local or not self.host

    @property
    def array_limit(self) -> int:
        if self.max_array_size:
            return int(self.max_array_size)
        return 1001 if self.scheduler == "slurm" else 75000

    @property
    def address(self) -> str:
        if self.is_local:
            return "this machine (login-node mode)"
        user = f"{self.user}@" if self.user else ""
        return f"{user}{self.host}:{self.port}" + (f" via {self.jump}" if self.jump else "")

    def as_local(self) -> Cluster:
        return attrs.evolve(self, local=True)

    def to_json(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["mode"] = "login-node" if self.is_local else "ssh"
        return data


def config_path() -> Path:
    return config_dir() / FILE_NAME


MAX_FILE_BYTES = 1 << 20  # clusters.toml as a whole
MAX_VALUE_CHARS = 4_096  # any one string in it: a host, a path, an option (ssh's argv must stay short)


def _read(path: Path) -> dict[str, Any]:
    """The file's tables, refused beyond the size limits (a 1 MB host ended as ssh's
    "Argument list too long")."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return {}
    if len(text) > MAX_FILE_BYTES:
        raise ConfigurationError(f"{path} is larger than the limit of {MAX_FILE_BYTES:,} bytes.")
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from None
    _check_sizes(data, path, "")
    return data


def _check_sizes(value: Any, path: Path, where: str) -> None:
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        raise ConfigurationError(f"{where or 'A value'} in {path} has {len(value):,} characters; the limit is "
                                 f"{MAX_VALUE_CHARS:,}.")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_sizes(str(key), path, f"The key {str(key)[:40]!r}")
            _check_sizes(item, path, f"{where}.{key}".lstrip(".")[:200])
    elif isinstance(value, list):
        for item in value:
            _check_sizes(item, path, where)


def _cluster(name: str, raw: Any, path: Path) -> Cluster:
    where = f"[clusters.{name}] in {path}"
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{where} must be a table, got {type(raw).__name__}.")
    unknown = set(raw) - _KEYS
    if unknown:
        raise ConfigurationError(f"{where}: unknown keys {sorted(unknown)}. Known keys: {sorted(_KEYS)}.")
    scheduler = str(raw.get("scheduler", "slurm")).lower()
    if scheduler in ("gridengine", "grid_engine", "uge", "ge"):
        scheduler = "sge"
    if scheduler not in SCHEDULERS:
        raise ConfigurationError(f"{where}: scheduler = {raw['scheduler']!r}; use \"slurm\" or \"sge\".")
    port = raw.get("port", 22)
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigurationError(f"{where}: port = {port!r} must be a whole number from 1 to 65535.")
    staging = str(raw.get("staging", "~/xcore-staging"))
    if not _SAFE_PATH.fullmatch(staging):
        raise ConfigurationError(
            f"{where}: staging = {staging!r}: use a path without spaces, quotes, '$', '`' or backslashes "
            "(schedulers read it in directives that are not shell-quoted)."
        )
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ConfigurationError(f"{where}: defaults must be a table ([clusters.{name}.defaults]).")
    max_array = raw.get("max_array_size")
    if max_array is not None and (not isinstance(max_array, int) or max_array < 1):
        raise ConfigurationError(f"{where}: max_array_size = {max_array!r} must be a whole number >= 1.")
    ssh = str(raw.get("ssh", "openssh")).lower()
    if ssh not in SSH_CLIENTS:
        raise ConfigurationError(f"{where}: ssh = {raw['ssh']!r}; use \"openssh\" or \"paramiko\".")
    persist = raw.get("control_persist", 300)
    if not isinstance(persist, int) or isinstance(persist, bool) or persist < 0:
        raise ConfigurationError(f"{where}: control_persist = {persist!r} must be a whole number of seconds >= 0.")
    return Cluster(
        name=name,
        scheduler=scheduler,
        host=raw.get("host") or None,
        user=raw.get("user"),
        port=port,
        key=raw.get("key"),
        known_hosts=raw.get("known_hosts"),
        jump=raw.get("jump"),
        staging=staging,
        local=bool(raw.get("local", False)),
        max_array_size=max_array,
        singularity=str(raw.get("singularity", "singularity")),
        connect_timeout=float(raw.get("connect_timeout", 15.0)),
        ssh=ssh,
        control_persist=persist,
        defaults=dict(defaults),
    )


def load_clusters(path: Path | None = None) -> tuple[dict[str, Cluster], str | None]:
    """All configured clusters by name, and the configured default name (if any)."""
    path = path or config_path()
    data = _read(path)
    unknown = set(data) - {"default", "clusters"}
    if unknown:
        raise ConfigurationError(f"{path}: unknown top-level keys {sorted(unknown)}; clusters go in [clusters.NAME].")
    clusters = {name: _cluster(name, raw, path) for name, raw in dict(data.get("clusters", {})).items()}
    default = data.get("default")
    if default is not None and default not in clusters:
        raise ConfigurationError(f"{path}: default = {default!r} names no cluster; "
                                 f"known: {sorted(clusters) or 'none'}.")
    return clusters, default


def resolve(name: str | None, scheduler: str | None = None) -> Cluster:
    """The cluster an executor runs on.

    Order: the executor's ``cluster``, then ``XCORE_CLUSTER``, then ``default`` in the file,
    then the only configured cluster with a matching scheduler, then this machine.
    """
    clusters, default = load_clusters()
    chosen = name or os.environ.get(ENV_CLUSTER) or default
    if chosen:
        if chosen in clusters:
            cluster = clusters[chosen]
        elif chosen == LOCAL:
            cluster = Cluster(name=LOCAL, scheduler=scheduler or "slurm", local=True)
        else:
            source = ("the executor's cluster=" if name
                      else f"{ENV_CLUSTER}=" if os.environ.get(ENV_CLUSTER) else "default = ")
            raise ConfigurationError(
                f"Cluster {chosen!r} (from {source}{chosen!r}) is not in {config_path()}; configured: "
                f"{', '.join(sorted(clusters)) or 'none'}. Add a [clusters.{chosen}] table (see `xcore cluster list`)."
            )
    else:
        matching = [c for c in clusters.values() if scheduler is None or c.scheduler == scheduler]
        cluster = matching[0] if len(matching) == 1 else Cluster(name=LOCAL, scheduler=scheduler or "slurm", local=True)
    if scheduler is not None and cluster.scheduler != scheduler:
        raise ConfigurationError(
            f"Cluster {cluster.name!r} runs scheduler {cluster.scheduler!r}, but the executor is for {scheduler!r}: "
            f"use {'xhpc.GridEngine' if cluster.scheduler == 'sge' else 'xhpc.Slurm'} for it."
        )
    return cluster


def find(name: str, scheduler: str, local: bool) -> Cluster:
    """The cluster a handle was launched on, from a later process."""
    clusters, _ = load_clusters()
    cluster = clusters.get(name)
    if cluster is None:
        if name != LOCAL:
            raise ConfigurationError(
                f"Jobs were launched on cluster {name!r}, which is no longer in {config_path()}; "
                "put its entry back to see their status."
            )
        cluster = Cluster(name=LOCAL, scheduler=scheduler, local=True)
    return cluster.as_local() if local else cluster
