"""Packaging: each distinct packageable turned into an executable once, by the plugin that
owns its executor spec (the ``xcore_package`` hook)."""

from __future__ import annotations

from collections.abc import Sequence

from xcore import paths
from xcore.hooks.host import PluginHost, get_host
from xcore.model.execution import PackagingContext
from xcore.model.job_blocks import Executable, Packageable
from xcore.progress import Progress


def package(packageables: Sequence[Packageable], *, host: PluginHost | None = None,
            progress: Progress | None = None) -> list[Executable]:
    """Package each distinct packageable once, in order."""
    host = host or get_host()
    progress = progress or Progress()
    context = PackagingContext(paths.home() / "cache", progress)
    done: list[tuple[Packageable, Executable]] = []
    result = []
    for index, packageable in enumerate(packageables, 1):
        match = next((exe for p, exe in done if p == packageable), None)
        if match is None:
            progress.update("packaging", index, len(packageables), packageable.executable_spec.name)
            match = host.package(packageable, context)
            done.append((packageable, match))
        result.append(match)
    progress.clear()
    return result
