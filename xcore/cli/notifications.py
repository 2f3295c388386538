"""``xcore notifications``: what was recorded for the configured sinks and how delivery went,
so a sink that fails is seen (its last error, its attempts, when it is tried again)."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: `xcore --help` builds this parser and must stay fast
if TYPE_CHECKING:
    import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("notifications", help="list notification deliveries (sent, pending, failed)",
                       description="List the events recorded for the sinks in config.toml's [notifications] "
                       "and how their delivery went, newest first. See docs/notifications.md.")
    p.add_argument("experiment", nargs="?", type=int, help="only this experiment's")
    p.add_argument("--state", action="append", choices=("pending", "sending", "sent", "failed"),
                   help="only rows in this state (repeatable)")
    p.add_argument("--limit", "-n", type=int, default=50, help="how many (default 50)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func="xcore.cli.notifications:command")


def command(args: argparse.Namespace) -> int:
    from xcore.cli.output import print_json
    from xcore.cli.tables import format_time, printable, render_table
    from xcore.workspace import current

    rows = current().store.notifications(args.experiment, states=args.state or (), limit=max(args.limit, 1))
    if args.json:
        print_json([{"event_id": r.event_id, "type": r.event_type, "experiment": r.experiment_id, "sink": r.sink,
                     "state": r.state, "attempts": r.attempts, "last_error": r.last_error,
                     "created_at": r.created_at, "next_at": r.next_at, "sent_at": r.sent_at} for r in rows])
        return 0
    if not rows:
        print("No notifications recorded (configure sinks in config.toml: see docs/notifications.md).")
        return 0
    table = [[r.event_id, r.sink, r.state + (f" (try {r.attempts + 1} at {format_time(r.next_at)})"
                                             if r.state == "pending" and r.attempts else ""),
              r.attempts, printable(r.last_error)] for r in rows]
    print(render_table(["EVENT", "SINK", "STATE", "TRIES", "LAST ERROR"], table))
    return 0
