"""Answers a command can give without loading the store's code, for the common cases where
loading it is most of the time (issue 14: ``xcore list`` on an empty store within 3x of
``python -c pass``).

Each function returns the exit code when it answered, or None to run the command as usual:
anything unexpected (another store, an old schema, a launcher's lease to resolve, an error)
takes the normal path, which migrates, resolves and explains.
"""

from __future__ import annotations

import sys

from xcore.workspace.session import current, store_path

TYPE_CHECKING = False  # not typing's: importing typing costs every command ~10 ms
if TYPE_CHECKING:
    import argparse

__all__ = ["list_empty_store", "store_path"]


def list_empty_store(args: argparse.Namespace) -> int | None:
    """``xcore list`` of the built-in SQLite store when it holds no experiment and no
    launcher lease (``Workspace.holds_nothing``): read-only, without the store module, attrs
    or the records."""
    if args.limit < 0 or args.status:  # the usual path checks these and says what is wrong
        return None
    if not current().holds_nothing():
        return None
    if args.json:
        sys.stdout.write("[]\n")
    else:
        print("No experiments yet. Launch one with: xcore launch LAUNCH_SCRIPT.py", file=sys.stderr)
    return 0
