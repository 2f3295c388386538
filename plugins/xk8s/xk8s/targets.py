"""Named targets, read from ``k8s.toml`` in the xcore config directory.

Example (``~/.config/xcore/k8s.toml``; ``XCORE_CONFIG_DIR`` moves it)::

    default = "gke"                  # optional; XK8S_TARGET overrides it

    [targets.gke]
    context = "gke_lab_us-central1_train"   # a kubeconfig context (KUBECONFIG is honoured)
    namespace = "research"
    queue = "lab-queue"              # Kueue LocalQueue, checked by `xcore k8s check`
    registry = "us-docker.pkg.dev/lab/xcore"

    [targets.gke.defaults]           # executor fields used when the executor leaves them unset
    service_account = "trainer"
    image_pull_secrets = ["regcred"]

Without a file (or target) the kubeconfig's current context and namespace ``default`` apply.
"""

from __future__ import annotations

import os
import tomllib
from typing import Any

import attrs

from xcore import plugin as xp

FILE_NAME = "k8s.toml"


@attrs.frozen
class Target:
    name: str | None
    context: str | None = None
    namespace: str = "default"
    queue: str | None = None
    registry: str | None = None
    defaults: dict[str, Any] = attrs.field(factory=dict)


def load_config() -> dict[str, Any]:
    path = xp.config_dir() / FILE_NAME
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise xp.ConfigurationError(f"{path}: {exc}; fix the TOML syntax.") from None


def names() -> list[str]:
    return sorted(load_config().get("targets", {}))


def get(name: str | None) -> Target:
    """The target ``name``, else ``XK8S_TARGET``, else the file's ``default``, else none."""
    config = load_config()
    name = name or os.environ.get("XK8S_TARGET") or config.get("default")
    if not name:
        return Target(None)
    entries = config.get("targets", {})
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise xp.ConfigurationError(f"xk8s: no target {name!r} in {xp.config_dir() / FILE_NAME} "
                                    f"(known: {known}); add [targets.{name}] or fix the name.")
    entry = dict(entries[name])
    unknown = set(entry) - {"context", "namespace", "queue", "registry", "defaults"}
    if unknown:
        raise xp.ConfigurationError(f"xk8s: target {name!r} has unknown keys {sorted(unknown)}; "
                                    "known: context, namespace, queue, registry, defaults.")
    return Target(name, entry.get("context"), entry.get("namespace") or "default", entry.get("queue"),
                  entry.get("registry"), dict(entry.get("defaults", {})))


def resolve(executor: Any) -> tuple[Any, str | None, str]:
    """The executor with the target's defaults filled in, its context and its namespace."""
    target = get(executor.target)
    fields = {f.name: f for f in attrs.fields(type(executor))}
    changes: dict[str, Any] = {}
    for key, value in target.defaults.items():
        if key not in fields or key in ("target", "context", "namespace", "requirements"):
            raise xp.ConfigurationError(f"xk8s: target {target.name!r} sets unknown default {key!r}.")
        current = getattr(executor, key)
        if current is None or current == [] or current == {}:
            changes[key] = value
    if target.queue and executor.queue is None:
        changes["queue"] = target.queue
    if changes:
        executor = attrs.evolve(executor, **changes)
    return executor, executor.context or target.context, executor.namespace or target.namespace
