"""What becomes of a job that waits for others, just before its batch is submitted.

The launcher (``xcore.runtime.launcher``) hands each launch group here. A job whose
dependencies all ended as its ``when`` asks is submitted as usual; one whose dependency ended
otherwise is never submitted and reads CANCELLED (``dependency 3/1 failed``). The rest wait:
natively, when the executor's backend says ``native_dependencies`` and every dependency is in
the same submission or was submitted earlier to the same kind (the backend gets them as
``LaunchRequest.depends_on``); else the unit is *held*: recorded PENDING with ``waiting for
3/1`` and submitted later, exactly once, by whichever xcore process observes its dependencies
end (``xcore.runtime.dependents``). What a held job needs to be submitted that the store keeps
redacted (its environment, its executor and executable as given) waits in a private file,
``$XCORE_HOME/held/<job id>.json`` (0600).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from xcore import paths
from xcore.model.dependencies import Dependency, DependencyEdge, dependency_message, satisfied, waiting_message
from xcore.model.status import Status

if TYPE_CHECKING:
    from xcore.hooks.host import PluginHost
    from xcore.model.execution import LaunchRequest
    from xcore.store import MetadataStore
    from xcore.store.records import JobRecord


@attrs.define
class Gate:
    """A launch group sorted: ``submit`` now (requests carrying their native ``depends_on``),
    ``held`` units (their jobs and PENDING message), ``cancelled`` jobs with their reason.
    Items are the launcher's ``PendingJob``s (opaque here: ``.request``, ``.edges``)."""

    submit: list[Any] = attrs.field(factory=list)
    held: list[tuple[tuple[int, int], list[Any], str]] = attrs.field(factory=list)
    cancelled: list[tuple[Any, str]] = attrs.field(factory=list)


def _backend(host: PluginHost, kind: str) -> Any:
    """The backend object serving executor ``kind`` (None for a plugin of hook functions)."""
    try:
        return host.kinds.entry(kind).backend
    except Exception:  # noqa: BLE001 - an unknown kind fails its launch elsewhere, with its reason
        return None


def _waits(backend: Any, executor: Any, when: str) -> bool:
    """Whether ``backend`` waits natively for a dependency with ``when`` of a job of ``executor``."""
    return backend is not None and bool(getattr(backend, "native_dependencies", False)) and bool(
        backend.waits_for(executor, when))


def gate(store: MetadataStore, host: PluginHost, kind: str, group: Sequence[Any]) -> Gate:
    """Sort ``group`` (the launcher's pending jobs of executor ``kind``, in add order: a
    dependency in the same group always comes before its dependents)."""
    backend = _backend(host, kind)
    here = {p.request.job_id for p in group}
    held_ids: set[int] = set()
    cancelled_ids: dict[int, str] = {}
    cache: dict[tuple[int, int], list[JobRecord]] = {}
    units: dict[tuple[int, int], list[Any]] = {}
    for pending in group:
        units.setdefault((pending.request.experiment_id, pending.request.work_unit_id), []).append(pending)
    needed: dict[int, set[int]] = {}  # read once per experiment: a sweep of dependents is one read
    for jobs in units.values():
        for edge in jobs[0].edges:
            needed.setdefault(edge.on_experiment_id, set()).add(edge.on_work_unit_id)
    for experiment_id, unit_ids in needed.items():
        found = {u.id: u.jobs for u in store.work_units(experiment_id, sorted(unit_ids))}
        cache.update({(experiment_id, u): found.get(u, []) for u in unit_ids})
    out = Gate()
    for key, jobs in units.items():
        edges: Sequence[DependencyEdge] = jobs[0].edges
        if not edges:
            out.submit += jobs
            continue
        deps: list[Dependency] = []
        waiting: list[str] = []
        cancel = ""
        for edge in edges:
            can_wait = _waits(backend, jobs[0].request.executor, edge.when)
            for record in _dependency_jobs(edge, cache):
                if record is None:  # a unit without jobs yet (a job generator's): wait
                    waiting.append(edge.on_name)
                elif record.id in cancelled_ids:
                    cancel = dependency_message(edge.on_name, Status.CANCELLED)
                elif record.id in held_ids:
                    waiting.append(edge.on_name)
                elif record.status.is_terminal:
                    if not satisfied(record.status, edge.when):
                        cancel = dependency_message(edge.on_name, record.status)
                elif can_wait and record.id in here:
                    deps.append(Dependency(record.id, None, edge.when, edge.on_name))
                elif can_wait and record.handle is not None and record.executor_kind == kind:
                    deps.append(Dependency(record.id, host.serializer.load(record.handle), edge.when, edge.on_name))
                else:
                    waiting.append(edge.on_name)
                if cancel:
                    break
            if cancel:
                break
        if cancel:
            for pending in jobs:
                cancelled_ids[pending.request.job_id] = cancel
                out.cancelled.append((pending, cancel))
        elif waiting:
            held_ids.update(p.request.job_id for p in jobs)
            out.held.append((key, jobs, waiting_message(waiting)))
        else:
            for pending in jobs:
                pending.request = attrs.evolve(pending.request, depends_on=tuple(deps))
            out.submit += jobs
    return out


def _dependency_jobs(edge: DependencyEdge, cache: dict[tuple[int, int], list[JobRecord]]) -> list[JobRecord | None]:
    """The jobs ``edge`` waits for, as the store had them at the gate ([None] if it had none yet)."""
    jobs = [j for j in cache.get((edge.on_experiment_id, edge.on_work_unit_id), [])
            if not edge.on_job or j.name == edge.on_job]
    return list(jobs) if jobs else [None]


# -- what a held job needs later, kept private --------------------------------------------------

def held_file(job_id: int) -> Path:
    return paths.home() / "held" / f"{job_id}.json"


def keep_request(host: PluginHost, request: LaunchRequest) -> None:
    """Write what the store redacts of a held job's request to its private file."""
    from xcore.plumbing.files import atomic_write

    serializer = host.serializer
    data = {"executor": serializer.dump(request.executor), "executable": serializer.dump(request.executable),
            "args": list(request.args), "env": dict(request.env)}
    atomic_write(held_file(request.job_id), json.dumps(data))


def kept_request(host: PluginHost, record: JobRecord) -> dict[str, Any]:
    """A held job's executor, executable, args and env: from its private file if this machine
    has it, else as the store keeps them (secrets redacted)."""
    try:
        data = json.loads(held_file(record.id).read_text())
    except (OSError, ValueError):
        data = {"executor": record.executor, "executable": record.executable, "args": record.args,
                "env": record.env}
    serializer = host.serializer
    return {"executor": serializer.load(data["executor"]), "executable": serializer.load(data["executable"]),
            "args": [str(a) for a in data["args"]], "env": {str(k): str(v) for k, v in data["env"].items()}}


def forget_request(job_id: int) -> None:
    held_file(job_id).unlink(missing_ok=True)
