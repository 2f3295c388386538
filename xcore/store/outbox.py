"""The notifications outbox: what the store keeps so that each event reaches each sink once.

An observer that sees an event inserts one row per (event id, sink) unless present: the primary
key is the claim, so of two observers that saw the same failure one row exists. Delivery is a
second claim: ``take`` moves due rows to ``sending`` for one caller (a conditional UPDATE names
it in ``claimed_by`` until ``lease_until``), and only that caller's ``finish`` counts. A caller
that dies while sending leaves its rows to be taken again when the lease ends.
"""

from __future__ import annotations

from typing import Any

from xcore.model import datamodel

PENDING, SENDING, SENT, FAILED = "pending", "sending", "sent", "failed"
STATES = (PENDING, SENDING, SENT, FAILED)

_COLUMNS = ("event_id, sink, experiment_id, event_type, body, state, attempts, last_error, created_at, "
            "next_at, lease_until, sent_at")

INSERT = ("INSERT INTO notifications (event_id, sink, experiment_id, event_type, body, created_at, next_at)"
          " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (event_id, sink) DO NOTHING")
# Due: waiting for its (next) try, or taken by a caller whose lease ran out.
def due_sql(sinks: str = "") -> str:
    """Due rows (``sinks``: an extra condition on the sink, with its own parameters)."""
    return (f"SELECT {_COLUMNS} FROM notifications WHERE ((state = 'pending' AND next_at <= ?)"
            f" OR (state = 'sending' AND lease_until < ?)){f' AND {sinks}' if sinks else ''}"
            " ORDER BY created_at, event_id, sink LIMIT ?")

TAKE = ("UPDATE notifications SET state = 'sending', claimed_by = ?, lease_until = ?, attempts = attempts + 1"
        " WHERE event_id = ? AND sink = ? AND ((state = 'pending' AND next_at <= ?)"
        " OR (state = 'sending' AND lease_until < ?))")
MINE = (f"SELECT {_COLUMNS} FROM notifications WHERE claimed_by = ? AND state = 'sending' AND lease_until = ?"
        " ORDER BY created_at, event_id, sink")
# A success keeps the last error: what went wrong before it is still worth reading.
FINISH = ("UPDATE notifications SET state = ?, last_error = COALESCE(NULLIF(?, ''), last_error), next_at = ?,"
          " sent_at = ?, lease_until = NULL"
          " WHERE event_id = ? AND sink = ? AND claimed_by = ? AND state = 'sending'")
LIST = f"SELECT {_COLUMNS} FROM notifications"
# One indexed read of one experiment's rows in trouble: given up, or pending again after a failed try.
TROUBLE = ("SELECT state, COUNT(*) AS n FROM notifications WHERE experiment_id = ?"
           " AND (state = 'failed' OR (state IN ('pending', 'sending') AND last_error <> '')) GROUP BY state")


@datamodel.frozen
class NewNotification:
    """An event for one sink, as an observer records it (``body``: the event's JSON)."""

    event_id: str
    sink: str
    experiment_id: int
    event_type: str
    body: str


@datamodel.frozen
class NotificationRecord:
    """One (event, sink) row and its delivery state: ``pending`` (waiting for a try; after a
    failed try ``last_error`` says why and ``next_at`` when the next comes), ``sending`` (taken
    by an observer), ``sent`` or ``failed`` (given up after the sink's last attempt)."""

    event_id: str
    sink: str
    experiment_id: int
    event_type: str
    body: str
    state: str
    attempts: int
    last_error: str
    created_at: float
    next_at: float
    lease_until: float | None
    sent_at: float | None


def record(row: Any) -> NotificationRecord:
    """A record from a row read by column name."""
    get = row.__getitem__
    return NotificationRecord(
        str(get("event_id")), str(get("sink")), int(get("experiment_id")), str(get("event_type")),
        str(get("body")), str(get("state")), int(get("attempts")), str(get("last_error")),
        float(get("created_at")), float(get("next_at")),
        None if get("lease_until") is None else float(get("lease_until")),
        None if get("sent_at") is None else float(get("sent_at")))
