"""xlocal's entry point: its two backends (``xlocal.backends``), handed to the core the first
time one of its kinds is needed. Importing this module imports nothing else of xlocal."""

from __future__ import annotations

from xcore.plugin import KindRegistrar, hookimpl

XCORE_PLUGIN_API = "1.1"


@hookimpl
def xcore_register_kinds(registry: KindRegistrar) -> None:
    from xlocal.backends import Containers, Processes

    registry.add_backend(Processes())
    registry.add_backend(Containers())
