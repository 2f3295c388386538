"""``xcore store info|migrate|copy``: look after the metadata store itself."""

from __future__ import annotations

import argparse
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # `xcore --help` builds this parser: keep its imports light (not even typing)
    from xcore.workspace import Workspace

EXIT_OK, EXIT_FAILED = 0, 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("store", help="the metadata store: info, migrate, copy",
                       description="Inspect, migrate or copy the metadata store (XCORE_STORE).")
    store_sub = p.add_subparsers(dest="store_command", metavar="STORE_COMMAND", required=True)
    q = store_sub.add_parser("info", help="URL (password hidden), schema version, row counts")
    q.add_argument("url", nargs="?", help="store URL (default: XCORE_STORE)")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func="xcore.cli.store_commands:info")
    q = store_sub.add_parser("migrate", help="migrate the store to this xcore's schema, in one transaction")
    q.add_argument("url", nargs="?", help="store URL (default: XCORE_STORE)")
    q.set_defaults(func="xcore.cli.store_commands:migrate")
    q = store_sub.add_parser("copy", help="copy experiments, work units, jobs and status history",
                             description="Copy every experiment from SRC to DST (e.g. your SQLite history into "
                             "the team's PostgreSQL). Idempotent: a second run copies nothing twice. Ids are "
                             "kept when free in DST, else renumbered and the mapping printed.")
    q.add_argument("source", metavar="SRC_URL")
    q.add_argument("destination", metavar="DST_URL")
    q.set_defaults(func="xcore.cli.store_commands:copy")


def _open(url: str | None, *, migrate: bool | None = None) -> Workspace:
    """A workspace of its own over the store at ``url`` (default: XCORE_STORE), closed after."""
    from xcore.workspace import Workspace

    return Workspace(url or None, store_options={} if migrate is None else {"migrate": migrate})


def info(args: argparse.Namespace) -> int:
    with _open(args.url) as workspace:
        data = workspace.store.info()
    if args.json:
        import json

        import attrs

        print(json.dumps(attrs.asdict(data)))
        return EXIT_OK
    rows = [("url", data.url), ("backend", data.backend),
            ("schema version", f"{data.schema_version} (this xcore: {data.code_schema_version})"),
            ("store id", data.store_id), ("experiments", data.experiments), ("work units", data.work_units),
            ("jobs", data.jobs), ("status events", data.status_events)]
    for name, value in rows:
        print(f"{name:<16}{value}")
    return EXIT_OK


def migrate(args: argparse.Namespace) -> int:
    with _open(args.url, migrate=True) as workspace:
        data = workspace.store.info()
        before = getattr(workspace.store, "migrated_from", None)
    if before is None:
        print(f"{data.url}: schema version {data.schema_version} is current; nothing to do.")
    else:
        print(f"{data.url}: migrated from schema version {before} to {data.schema_version} "
              f"({data.experiments} experiments, {data.jobs} jobs kept).")
    return EXIT_OK


def copy(args: argparse.Namespace) -> int:
    from xcore.store.copy import copy_store

    with _open(args.source) as source, _open(args.destination) as destination:
        src, dst = source.store.info(), destination.store.info()
        if src.store_id == dst.store_id:
            print(f"error: {src.url} and {dst.url} are the same store.", file=sys.stderr)
            return EXIT_FAILED
        report = copy_store(source.store, destination.store)
    for imported in report.copied:
        if imported.experiment_id != imported.source_id:
            print(f"experiment {imported.source_id} -> {imported.experiment_id} (id taken in the destination)")
    renumbered_jobs = sum(1 for i in report.copied if i.jobs_renumbered)
    print(f"copied {len(report.copied)} experiments from {src.url} to {dst.url}; "
          f"{report.skipped} already there; {len(report.renumbered)} renumbered"
          + (f"; new job ids for {renumbered_jobs} experiments" if renumbered_jobs else "") + ".")
    return EXIT_OK
