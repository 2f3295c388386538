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
    path = store_path()
    if not path or not os.path.isfile(path) or os.path.getsize(path) == 0:
        return None  # absent (the usual path creates it) or not a store (it explains)
    import sqlite3

    from xcore.store import migrations as store_migrations

    uri = os.path.abspath(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    try:
        db = sqlite3.connect(f"file:{uri}?mode=ro", uri=True, timeout=1)
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


def store_path() -> str | None:
    """The built-in store's file, as ``xcore.paths.store_url()`` names it, without importing
    pathlib (about a quarter of what this fast path would otherwise cost); None for another
    store or a platform whose default location only ``xcore.paths`` knows."""
    url = os.environ.get("XCORE_STORE")
    if not url:
        home = os.environ.get("XCORE_HOME")
        if home:
            home = os.path.expanduser(home)
        elif sys.platform.startswith("linux"):
            home = os.path.join(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "xcore")
        else:
            return None
        return os.path.join(home, "xcore.db")
    if not url.startswith("sqlite:"):
        return None
    return (url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url.removeprefix("sqlite:")) or None
