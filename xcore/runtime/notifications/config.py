"""The ``[notifications]`` table of ``config.toml`` (in the xcore config directory), checked.

Every mistake is one error naming the file, the sink and the key, read again on each observer
cycle only when the file changed. Secrets (a webhook's signing secret, an SMTP password, a
Slack URL) may come from the environment (``*_env`` keys) and never appear in a message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from xcore.errors import ConfigurationError
from xcore.paths import config_dir

FILE_NAME = "config.toml"
EVENT_TYPES = ("experiment_ended", "unit_failed", "failures_reached", "retry", "waiting")
_SETTINGS = {"failures": int, "waiting_secs": float, "budget_secs": float, "sinks": list}
COMMON_KEYS = ("name", "type", "events", "tags", "users", "max_attempts", "backoff_secs", "timeout")


@attrs.frozen
class SinkConfig:
    """One ``[[notifications.sinks]]`` entry: the filters and retry policy every sink shares,
    and ``options``, the keys its type reads (checked by the type's factory)."""

    name: str
    type: str
    where: str  # "[[notifications.sinks]] 'name' in /path/config.toml", for messages
    events: tuple[str, ...] = EVENT_TYPES
    tags: tuple[str, ...] = ()  # only experiments with one of these tags (none: every experiment)
    users: tuple[str, ...] = ()  # only experiments of these users
    max_attempts: int = 8
    backoff_secs: float = 30.0  # before the 2nd try; doubles each time, at most an hour
    timeout: float = 10.0
    options: Mapping[str, Any] = attrs.field(factory=dict, repr=False)  # may hold a secret: never shown

    def wants(self, event_type: str, tags: list[str], user: str) -> bool:
        return (event_type in self.events and (not self.tags or bool(set(self.tags) & set(tags)))
                and (not self.users or user in self.users))


@attrs.frozen
class NotificationConfig:
    failures: int = 0  # "failures_reached" fires when an experiment's failed units reach this (0: never)
    waiting_secs: float = 0.0  # "waiting" fires for a job PENDING longer than this (0: never)
    budget_secs: float = 5.0  # the most time one observer cycle spends delivering
    sinks: tuple[SinkConfig, ...] = ()


def config_path() -> Path:
    return config_dir() / FILE_NAME


def load(path: Path | None = None) -> NotificationConfig:
    """The notifications configured in ``path`` (``config.toml``); none when absent."""
    import tomllib

    path = path or config_path()
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return NotificationConfig()
    except OSError as exc:
        raise ConfigurationError(f"Cannot read {path}: {exc.strerror or exc}.") from None
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from None
    return parse(data.get("notifications", {}), path)


def parse(table: Any, path: Path) -> NotificationConfig:
    where = f"[notifications] in {path}"
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where} must be a table.")
    _no_unknown(table, _SETTINGS, where)
    failures = _number(table, "failures", where, int, 0, 0)
    waiting = _number(table, "waiting_secs", where, float, 0.0, 0.0)
    budget = _number(table, "budget_secs", where, float, 5.0, 0.1)
    raw_sinks = table.get("sinks", [])
    if not isinstance(raw_sinks, list) or not all(isinstance(s, dict) for s in raw_sinks):
        raise ConfigurationError(f"notifications.sinks in {path} must be an array of tables ([[notifications.sinks]]).")
    sinks = tuple(_sink(raw, index, path) for index, raw in enumerate(raw_sinks, 1))
    names = [s.name for s in sinks]
    if duplicate := next((n for n in names if names.count(n) > 1), None):
        raise ConfigurationError(f"Two [[notifications.sinks]] in {path} are named {duplicate!r}; "
                                 f"give each its own name.")
    return NotificationConfig(failures, waiting, budget, sinks)


def _sink(raw: dict[str, Any], index: int, path: Path) -> SinkConfig:
    name = raw.get("name")
    where = f"[[notifications.sinks]] #{index} in {path}"
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise ConfigurationError(f"{where} needs a name: a short string (e.g. name = \"lab-slack\").")
    where = f"[[notifications.sinks]] {name!r} in {path}"
    kind = raw.get("type")
    if not isinstance(kind, str) or not kind:
        raise ConfigurationError(f"{where} needs a type (webhook, slack, email, command, or a plugin's).")
    events = _strings(raw, "events", where, EVENT_TYPES)
    if unknown := [e for e in events if e not in EVENT_TYPES]:
        raise ConfigurationError(f"{where}: events has {unknown[0]!r}, not one of {', '.join(EVENT_TYPES)}.")
    return SinkConfig(
        name=name, type=kind, where=where, events=events,
        tags=_strings(raw, "tags", where, ()), users=_strings(raw, "users", where, ()),
        max_attempts=_number(raw, "max_attempts", where, int, 8, 1),
        backoff_secs=_number(raw, "backoff_secs", where, float, 30.0, 0.0),
        timeout=_number(raw, "timeout", where, float, 10.0, 0.1),
        options={k: v for k, v in raw.items() if k not in COMMON_KEYS})


def _no_unknown(table: Mapping[str, Any], known: Mapping[str, Any] | tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in known:
            raise ConfigurationError(f"{where}: unknown key {key!r}; the keys are {', '.join(known)}.")


def _strings(raw: Mapping[str, Any], key: str, where: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if key not in raw:
        return default
    value = raw[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigurationError(f"{where}: {key} must be a list of strings (e.g. {key} = [\"...\"]).")
    return tuple(value)


def _number(raw: Mapping[str, Any], key: str, where: str, kind: type, default: Any, minimum: float) -> Any:
    if key not in raw:
        return default
    value = raw[key]
    ok = isinstance(value, int) if kind is int else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or value < minimum:
        what = "a whole number" if kind is int else "a number"
        raise ConfigurationError(f"{where}: {key} = {value!r} must be {what} >= {minimum:g}.")
    return kind(value)


# -- what the sink types read from ``options`` ---------------------------------------------------


def check_keys(sink: SinkConfig, allowed: tuple[str, ...]) -> None:
    """A key the sink's type does not read is a mistake: name it."""
    for key in sink.options:
        if key not in allowed:
            raise ConfigurationError(f"{sink.where}: unknown key {key!r} for type {sink.type!r}; its keys are "
                                     f"{', '.join((*COMMON_KEYS, *allowed))}.")


def text(sink: SinkConfig, key: str, *, required: bool = True, default: str = "") -> str:
    value = sink.options.get(key, default)
    if not isinstance(value, str) or (required and not value):
        raise ConfigurationError(f"{sink.where}: {key} must be a non-empty string.")
    return value


def secret(sink: SinkConfig, key: str, *, required: bool) -> str:
    """``key`` from the file, or the environment variable ``<key>_env`` names; never echoed."""
    env_key = f"{key}_env"
    if key in sink.options and env_key in sink.options:
        raise ConfigurationError(f"{sink.where}: set {key} or {env_key}, not both.")
    if env_key in sink.options:
        variable = text(sink, env_key)
        value = os.environ.get(variable, "")
        if not value and required:
            raise ConfigurationError(f"{sink.where}: {env_key} names ${variable}, which is not set; export it.")
        return value
    value = sink.options.get(key, "")
    if not isinstance(value, str) or (required and not value):
        raise ConfigurationError(f"{sink.where}: {key} (or {env_key}, an environment variable) must be set "
                                 f"to a non-empty string.")
    return value
