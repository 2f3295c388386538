"""Answers a command can give without loading the store's code, for the common cases where
loading it is most of the time (issue 14: ``xcore list`` on an empty store within 3x of
``python -c pass``).

Each function returns the exit code when it answered, or None to run the command as usual:
anything unexpected (another store, an old schema, a launcher's lease to resolve, an error)
takes the normal path, which migrates, resolves and explains.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs every command ~10 ms
if TYPE_CHECKING:
    import argparse


def list_empty_store(args: argparse.Namespace) -> int | None:
    """``xcore list`` of the built-in SQLite store when it holds no experiment and no
    launcher lease: read-only, without the store module, attrs or the records."""
    if args.limit < 0 or args.status:  # the usual path checks these and says what is wrong
        return None
    from xcore import paths, store_migrations

    url = paths.store_url()
    if not url.startswith("sqlite:"):
        return None
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url.removeprefix("sqlite:")
    if not path or not os.path.isfile(path) or os.path.getsize(path) == 0:
        return None  # absent (the usual path creates it) or not a store (it explains)
    import sqlite3
    from urllib.parse import quote

    try:
        db = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True, timeout=1)
        try:
            [version] = db.execute("PRAGMA user_version").fetchone()
            if version != store_migrations.SCHEMA_VERSION:
                return None
            [empty] = db.execute("SELECT NOT EXISTS (SELECT 1 FROM experiments)"
                                 " AND NOT EXISTS (SELECT 1 FROM launch_leases)").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    if not empty:
        return None
    if args.json:
        sys.stdout.write("[]\n")
    else:
        print("No experiments yet. Launch one with: xcore launch LAUNCH_SCRIPT.py", file=sys.stderr)
    return 0
