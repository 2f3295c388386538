"""xhpc's entry point: its backend (``xhpc.backend``), handed to the core the first time one
of its kinds is needed, and its ``xcore cluster`` commands. Importing this module imports
nothing else of xhpc (no SSH library)."""

from __future__ import annotations

from typing import Any

from xcore.plugin import KindRegistrar, hookimpl

XCORE_PLUGIN_API = "1.1"


@hookimpl
def xcore_register_kinds(registry: KindRegistrar) -> None:
    from xhpc.backend import Clusters

    registry.add_backend(Clusters())


@hookimpl
def xcore_add_commands(subparsers: Any) -> None:
    from xhpc.cli import add_commands

    add_commands(subparsers)
