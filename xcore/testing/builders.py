"""Builders for the objects hooks receive, for plugin unit tests without a launcher."""

from __future__ import annotations

import importlib
import io
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

from xcore.hooks.host import PluginHost, reset_host
from xcore.model.execution import LaunchContext, LaunchRequest, PackagingContext
from xcore.model.job_blocks import Executable, Executor
from xcore.progress import Progress

_job_ids = itertools.count(1)


def silent_progress() -> Progress:
    """A ``Progress`` that prints nothing (what the core passes under ``XCORE_QUIET=1``)."""
    return Progress(stream=io.StringIO(), enabled=False)


def make_packaging_context(cache_dir: str | Path, progress: Progress | None = None) -> PackagingContext:
    """A ``PackagingContext`` over ``cache_dir`` (created), silent by default."""
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    return PackagingContext(Path(cache_dir), progress or silent_progress())


def make_launch_context(state_dir: str | Path, progress: Progress | None = None,
                        experiment_title: str = "test") -> LaunchContext:
    """A ``LaunchContext`` over ``state_dir`` (created), silent by default."""
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    return LaunchContext(Path(state_dir), progress or silent_progress(), experiment_title)


def make_request(executable: Executable, executor: Executor, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, *, job_id: int | None = None, experiment_id: int = 1,
                 work_unit_id: int | None = None, job_name: str = "job") -> LaunchRequest:
    """A ``LaunchRequest`` as the core builds it (``args`` final argv strings, ``env`` the job's own)."""
    job_id = next(_job_ids) if job_id is None else job_id
    return LaunchRequest(job_id, experiment_id, job_id if work_unit_id is None else work_unit_id, job_name,
                         executable, executor, [str(a) for a in args], dict(env or {}))


def plugin_host(plugins: Mapping[str, object | str] | None = None, *, entry_points: bool = False,
                install: bool = True) -> PluginHost:
    """A plugin host with ``plugins`` registered by name (a module, an object, or a module path).

    ``entry_points=False`` (default) loads no installed plugin, so a unit test sees only what
    it registers; ``install=True`` makes it the process's host (what ``xcore.get_experiment``,
    ``create_experiment`` and the CLI use). Call ``xcore.hooks.host.reset_host()`` to undo.
    """
    host = PluginHost(load_entry_points=entry_points)
    for name, plugin in (plugins or {}).items():
        if name in host.infos:
            continue
        host.register(importlib.import_module(plugin) if isinstance(plugin, str) else plugin, name)
        if host.infos[name].status != "loaded":
            raise RuntimeError(f"plugin {name!r} failed to register: {host.infos[name].error}")
    if install:
        reset_host(host)
    return host
