"""The experiments of this process: create, reopen and list them, and remember which ones
were created (``xcore launch`` reports them and ``--wait`` waits for them).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from xcore import paths
from xcore.errors import ConfigurationError
from xcore.hooks.host import PluginHost
from xcore.launch import vcs
from xcore.launch.experiment import Experiment, created_experiment_ids
from xcore.launch.units import current_user
from xcore.model import limits
from xcore.runtime.launcher import hostname
from xcore.store import MetadataStore
from xcore.store.records import ExperimentRecord
from xcore.workspace import Workspace, current

_launch_script: Path | None = None


def set_launch_script(path: Path | None) -> None:
    """Called by ``xcore launch`` so experiments record which script created them."""
    global _launch_script
    _launch_script = path
    paths.set_launch_script(path)  # relative paths in the script are taken from its directory


def _script_path() -> Path | None:
    if _launch_script is not None:
        return _launch_script
    candidate = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    return candidate.resolve() if candidate and candidate.is_file() else None


def _sha256(data: bytes) -> str:
    """hashlib.sha256's hex digest, from the interpreter's own SHA-256 where it has one: hashlib
    loads OpenSSL first (~3.5 ms of every launch's start-up, issue 14)."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # Python 3.11 (3.12+: _sha2)
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]
        except ImportError:
            from hashlib import sha256
    return str(sha256(data).hexdigest())


def open_store(host: PluginHost | None = None) -> MetadataStore:
    """The store of this process's workspace (opened once); with ``host``, as that host opens it."""
    workspace = current()
    if host is not None and host is not workspace.host:
        workspace = Workspace(host=host)
    return workspace.store


def create_experiment(
    experiment_title: str | None = None, *, tags: Sequence[str] = (), notes: str = "", title: str | None = None
) -> Experiment:
    """Start a new experiment. Backend-neutral: each job's executor picks its backend."""
    running = paths.launch_script()
    if running is not None and paths.stdlib_shadowing(running):  # `python secrets.py`
        raise ConfigurationError(paths.stdlib_shadowing(running))
    limits.check_experiment(title or experiment_title or "", list(tags), notes)
    workspace = current()
    host, store = workspace.host, workspace.store
    script = _script_path()
    git = vcs.git_state(script.parent if script else Path.cwd())
    record = store.create_experiment(
        title or experiment_title or (script.stem if script else "experiment"),
        tags=list(tags),
        notes=notes,
        script_path=str(script) if script else None,
        script_sha256=_sha256(script.read_bytes()) if script else None,
        git_commit=git.commit if git else None,
        git_dirty=git.dirty if git else None,
        user=current_user(),
        host=hostname(),
    )
    created_experiment_ids.append(record.id)
    experiment = Experiment(record, store, host)
    experiment.hold_lease()
    return experiment


def get_experiment(experiment_id: int) -> Experiment:
    """Reopen a recorded experiment to inspect it or add more work units."""
    workspace = current()
    host, store = workspace.host, workspace.store
    record = store.get_experiment(int(experiment_id))
    workspace.resolve_orphans()  # a killed launcher's units become relaunchable by identity
    return Experiment.reopen(record, store, host, store.work_units(record.id))


def list_experiments(*, status: str | None = None, title: str | None = None, tag: str | None = None,
                     limit: int | None = 20) -> list[ExperimentRecord]:
    return current().store.list_experiments(status=status, title=title, tag=tag, limit=limit)
