"""What any observing xcore process does when it sees jobs change.

Retries the backend cannot drive, dependents to release and notifications to deliver must
happen with the launcher long gone, so whichever process records a change (``xcore wait``,
``show``, the dashboard, ``xcore watch``) runs these duties on the jobs it saw change. Each
duty must be safe to run from several processes at once (claim work in the store, exactly
once) and must never block or break the observer: a duty that raises is reported on one line
and the refresh goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xcore.hooks.host import PluginHost
    from xcore.store import MetadataStore
    from xcore.store.records import JobRecord

#: A duty: called with the store, the plugin host and the jobs whose recorded state just
#: changed (records already updated in place).
ObserverDuty = Callable[["MetadataStore", "PluginHost", "Sequence[JobRecord]"], None]


def duties() -> tuple[ObserverDuty, ...]:
    """The duties, in the order they run. Imported here, lazily, so that a refresh that saw
    nothing change imports none of them. Notifications come last: they read the store after
    the others, so a retry relaunched here is announced as its new attempt at once (and a
    failure being retried reads active, never ``unit_failed``)."""
    from xcore.runtime.dependents import release
    from xcore.runtime.notifications import observe as notify
    from xcore.runtime.resubmit import relaunch_pending

    return (relaunch_pending, release, notify)


def held_seen(store: MetadataStore, host: PluginHost, jobs: Sequence[JobRecord]) -> None:
    """A refresh saw jobs held for their dependencies (``xcore.runtime.dependents``): release
    or cancel those whose dependencies decided, even if this process saw none of them end."""
    units = {(j.experiment_id, j.work_unit_id) for j in jobs if j.status.value == "PENDING" and j.handle is None}
    if not units:
        return
    from xcore.runtime.dependents import check_held

    try:
        check_held(store, host, units)
    except Exception as exc:  # noqa: BLE001 - an observer keeps observing whatever a duty does
        print(f"xcore: warning: releasing held work units failed: {type(exc).__name__}: {exc}", file=sys.stderr)


def after_refresh(store: MetadataStore, host: PluginHost, changed: Sequence[JobRecord]) -> None:
    """Run every duty on ``changed``; a failing duty is reported, never raised."""
    if not changed:
        return
    for duty in duties():
        try:
            duty(store, host, changed)
        except Exception as exc:  # noqa: BLE001 - an observer keeps observing whatever a duty does
            name = getattr(duty, "__qualname__", repr(duty))
            print(f"xcore: warning: {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
