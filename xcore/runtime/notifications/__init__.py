"""Notifications: events read from job changes, delivered once each to the configured sinks.

Any process that records job changes runs ``observe`` (an observer duty, see
``xcore.runtime.observers``): it reads the events the changes make (``events``), records them
in the store's outbox for each sink that wants them (``delivery.record``: the claim that makes
two observers deliver an event once), and sends what is due (``delivery.deliver``) within the
configured budget. ``tick`` is the same for a loop that runs whether or not anything changed
(``xcore watch`` calls it each cycle): it also finds jobs waiting longer than ``waiting_secs``
and experiments that ended while no observer ran, and retries failed deliveries.
Sinks and filters come from ``config.toml`` (``config``); see docs/notifications.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xcore.hooks.host import PluginHost
    from xcore.runtime.notifications.config import NotificationConfig
    from xcore.runtime.notifications.sinks import Sink
    from xcore.store import MetadataStore
    from xcore.store.records import JobRecord

_loaded: dict[tuple[str, int, int], tuple[NotificationConfig, dict[str, Sink]]] = {}
_warned: set[str] = set()


def configured(host: PluginHost | None = None, path: Path | None = None) -> tuple[NotificationConfig, dict[str, Sink]]:
    """The configuration and its built sinks, read again only when the file changed. Raises
    ``ConfigurationError`` naming the bad key."""
    from xcore.runtime.notifications import config

    path = path or config.config_path()
    try:
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
    except FileNotFoundError:
        return config.NotificationConfig(), {}
    if key not in _loaded:
        from xcore.runtime.notifications import sinks

        found = config.load(path)
        custom = {s.type for s in found.sinks} - set(sinks.BUILTIN)
        types = plugin_sink_types(host) if custom and host is not None else {}
        _loaded.clear()
        _loaded[key] = (found, {s.name: sinks.build(s, types) for s in found.sinks})
    return _loaded[key]


def plugin_sink_types(host: PluginHost) -> dict[str, Callable[..., Sink]]:
    """Sink types the plugins add (``xcore_notification_sinks``); a name two plugins claim is an error."""
    from xcore.errors import ConfigurationError

    found: dict[str, Callable[..., Sink]] = {}
    for answer in host.pm.hook.xcore_notification_sinks():
        for name, factory in (answer or {}).items():
            if name in found and found[name] is not factory:
                raise ConfigurationError(f"Two plugins add a notification sink type {name!r}; uninstall one.")
            found[name] = factory
    return found


def observe(store: MetadataStore, host: PluginHost, changed: Sequence[JobRecord]) -> None:
    """The observer duty: events of ``changed`` recorded, what is due delivered."""
    loaded = _configured_or_warn(host)
    if loaded is None:
        return
    from xcore.runtime.notifications import delivery, events

    config, sinks = loaded
    delivery.record(store, config, events.from_changes(store, changed, failures=config.failures))
    delivery.deliver(store, config, sinks)


def tick(store: MetadataStore, host: PluginHost | None, experiment_ids: Sequence[int]) -> dict[str, int]:
    """For a loop that runs each cycle whether or not a job changed (``xcore watch``): the
    events of ``experiment_ids`` that need no change to happen (a job PENDING longer than
    ``waiting_secs``; failures and an end no observer saw), then every due delivery, failed
    ones being retried included. Safe to call from many processes at once; returns the counts
    of ``deliver``."""
    loaded = _configured_or_warn(host)
    if loaded is None:
        return {}
    from xcore.runtime.notifications import delivery, events

    config, sinks = loaded
    found: list[dict[str, Any]] = []
    for experiment_id in experiment_ids:
        found += events.of_experiment(store, experiment_id, failures=config.failures)
    if config.waiting_secs:
        found += events.waiting(store, experiment_ids, config.waiting_secs)
    delivery.record(store, config, found)
    return delivery.deliver(store, config, sinks)


def after_launch(store: MetadataStore, host: PluginHost, experiment_id: int) -> None:
    """When a launch script's experiment context exits: what ended while it ran (before the
    experiment read launched, its end could not be told from a pause between adds)."""
    try:
        tick(store, host, [experiment_id])
    except Exception as exc:  # noqa: BLE001 - a launch never fails for a notification
        print(f"xcore: warning: notifications: {type(exc).__name__}: {exc}", file=sys.stderr)


def _configured_or_warn(host: PluginHost | None) -> tuple[NotificationConfig, Mapping[str, Sink]] | None:
    """The sinks, or None (none configured, or a bad config: said once per process)."""
    from xcore.errors import ConfigurationError

    try:
        config, sinks = configured(host)
    except ConfigurationError as exc:
        if str(exc) not in _warned:
            _warned.add(str(exc))
            print(f"xcore: warning: notifications are off: {exc}", file=sys.stderr)
        return None
    return (config, sinks) if config.sinks else None
