"""Recording events in the outbox and delivering what is due, in bounded time.

``record`` adds one row per (event, sink whose filters want it): inserted once, whoever saw it.
``deliver`` takes due rows one at a time (each taken by one observer alone, see
``xcore.store.outbox``) and sends them until none is due or the cycle's budget is spent: each
try gets at most the sink's timeout and what is left of the budget, so an observer is never
held longer than the budget, however slow a sink. A failed try is retried by whichever observer
runs once its backoff passed (``backoff_secs``, doubling, at most an hour), until the sink's
``max_attempts``; then the row reads ``failed`` with the last error.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from xcore.runtime.notifications.config import NotificationConfig, SinkConfig
from xcore.store.outbox import FAILED, PENDING, SENDING, SENT, NewNotification

if TYPE_CHECKING:
    from xcore.runtime.notifications.sinks import Sink
    from xcore.store import MetadataStore

MAX_BACKOFF = 3600.0
MIN_TRY_SECS = 0.5  # a try gets at least this long, even at the end of the budget


def record(store: MetadataStore, config: NotificationConfig, events: Sequence[Mapping[str, Any]]) -> int:
    """Add the events for the sinks that want them; how many (event, sink) rows were offered."""
    rows = []
    for event in events:
        experiment = event.get("experiment", {})
        for sink in config.sinks:
            if sink.wants(str(event["type"]), list(experiment.get("tags", [])), str(experiment.get("user", ""))):
                rows.append(NewNotification(str(event["id"]), sink.name, int(experiment["id"]), str(event["type"]),
                                            json.dumps(event, ensure_ascii=False, sort_keys=True)))
    store.add_notifications(rows)
    return len(rows)


def backoff(sink: SinkConfig, attempts: int) -> float:
    """Seconds before the try after ``attempts`` failed ones."""
    return min(sink.backoff_secs * 2 ** max(attempts - 1, 0), MAX_BACKOFF)


def deliver(store: MetadataStore, config: NotificationConfig, sinks: Mapping[str, Sink], *,
            budget: float | None = None) -> dict[str, int]:
    """Send what is due to the sinks built here, within ``budget`` seconds (the config's by
    default); counts of ``sent``, ``retry`` and ``failed`` tries."""
    budget = config.budget_secs if budget is None else budget
    deadline = time.monotonic() + budget
    claimant = uuid.uuid4().hex
    by_name = {s.name: s for s in config.sinks if s.name in sinks}
    counts = {"sent": 0, "retry": 0, "failed": 0}
    if not store.notifications(states=(PENDING, SENDING), limit=1):
        return counts  # nothing left to send: a read, not a write transaction, for every cycle
    while time.monotonic() < deadline:
        # The lease outlasts the try's timeout, so no second observer takes a row being sent.
        taken = store.take_notifications(claimant, budget + 60.0, 1, sinks=sorted(by_name))
        if not taken:
            break
        row = taken[0]
        sink = by_name[row.sink]
        timeout = max(MIN_TRY_SECS, min(sink.timeout, deadline - time.monotonic()))
        try:
            sinks[row.sink].send(json.loads(row.body), timeout)
        except Exception as exc:  # noqa: BLE001 - any failure of a sink is recorded, never raised
            error = (str(exc) or type(exc).__name__)[:500]
            if row.attempts >= sink.max_attempts:
                store.finish_notification(row.event_id, row.sink, claimant, FAILED, error)
                counts["failed"] += 1
                print(f"xcore: warning: notification {row.event_id} to {row.sink!r} failed after "
                      f"{row.attempts} tries: {error} (see xcore notifications)", file=sys.stderr)
            else:
                store.finish_notification(row.event_id, row.sink, claimant, PENDING, error,
                                          time.time() + backoff(sink, row.attempts))
                counts["retry"] += 1
        else:
            store.finish_notification(row.event_id, row.sink, claimant, SENT)
            counts["sent"] += 1
    return counts
