"""LaunchRequests -> CustomJob bodies (plain dicts with aiplatform_v1 field names).

A work unit's single job is one CustomJob with one worker pool. A JobGroup is one CustomJob
with a worker pool per job, placed as XManager places them: jobs named after Vertex's roles
(``chief``, ``worker``/``workers``, ``ps``/``parameter_server``, ``evaluator``) go to pools
0-3, otherwise jobs fill pools in order; pool 0 runs one replica (the chief), except a TPU
slice (one replica per host); a multi-host GPU chief spills its other hosts into pool 1. Args go to
``containerSpec.args`` and env to ``containerSpec.env`` as lists: nothing passes through a shell.
"""

from __future__ import annotations

import datetime
import json
import re
import secrets
import typing
from collections.abc import Sequence
from typing import Any

import attrs

from xcore import plugin as xp
from xgcp import machines
from xgcp.config import Target
from xgcp.executors import Vertex, VertexExecutable

ROLE_POOLS = {"chief": 0, "worker": 1, "workers": 1, "ps": 2, "parameter_server": 2, "parameter_servers": 2,
              "evaluator": 3, "evaluators": 3}
STRATEGY = {"standard": "STANDARD", "spot": "SPOT", "flex-start": "FLEX_START"}

LABEL_STORE, LABEL_EXPERIMENT = "xcore_store", "xcore_experiment"
LABEL_UNIT, LABEL_REQUEST = "xcore_unit", "xcore_request"


@attrs.define
class PlannedJob:
    """One CustomJob to create, and which requests (with their pool) it carries."""

    body: dict[str, Any]
    requests: list[tuple[xp.LaunchRequest, int]]
    project: str
    location: str
    request_id: str
    target: Target


def literal(value: str) -> str:
    """An env value as Vertex must be given it to pass ``value`` on unchanged: Vertex expands
    ``$(NAME)`` in env values against the variables defined before it and reads ``$$`` as an
    escaped ``$`` (its ``EnvVar`` reference, as Kubernetes does), so every ``$`` is doubled."""
    return value.replace("$", "$$")


def unliteral(value: str) -> str:
    """The value ``literal`` was given (a job's env read back from its CustomJob)."""
    return value.replace("$$", "$")


def new_request_id() -> str:
    return secrets.token_hex(8)


def label_value(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def pool_order(requests: Sequence[xp.LaunchRequest]) -> list[int]:
    names = [r.job_name.lower() for r in requests]
    if len(requests) > 1 and all(n in ROLE_POOLS for n in names):
        pools = [ROLE_POOLS[n] for n in names]
        if len(set(pools)) != len(pools):
            raise xp.ConfigurationError(f"JobGroup jobs {names} name the same Vertex worker pool twice.")
        if 0 not in pools:
            raise xp.ConfigurationError("A JobGroup with Vertex roles needs a 'chief' job (worker pool 0).")
        return pools
    if len(requests) > 4:
        raise xp.ConfigurationError(
            f"A Vertex CustomJob has at most 4 worker pools; this JobGroup has {len(requests)} jobs.")
    return list(range(len(requests)))


def worker_pool(request: xp.LaunchRequest, pool: int, checkpoint: str | None = None) -> dict[str, Any]:
    """The worker pool of one job; ``checkpoint``: its unit's ``XCORE_CHECKPOINT_DIR``, if any."""
    executor: Vertex = request.executor  # type: ignore[assignment]
    exe: VertexExecutable = request.executable  # type: ignore[assignment]
    if not isinstance(exe, VertexExecutable):
        raise xp.ConfigurationError(f"{request.full_name}: package it for xgcp.Vertex.Spec() before adding it.")
    requirements = executor.requirements
    if executor.machine_type:
        machine = next(m for m in machines.CPU_MACHINES + machines.ACCELERATOR_MACHINES
                       if m.machine_type == executor.machine_type)
    else:
        machine = machines.select_machine(requirements)
    machine_spec: dict[str, Any] = {"machine_type": machine.machine_type}
    if machine.vertex_accelerator:
        machine_spec["accelerator_type"] = machine.vertex_accelerator
        machine_spec["accelerator_count"] = machine.accelerator_count
    if machine.tpu_topology:
        machine_spec["tpu_topology"] = machine.tpu_topology
    replicas = machine.hosts if machine.hosts > 1 else requirements.replicas  # a TPU slice: one replica per host
    if pool == 0 and replicas != 1 and machine.hosts == 1:
        raise xp.ConfigurationError(
            f"{request.full_name}: Vertex's first worker pool (the chief) runs 1 replica, not {replicas}; "
            "put the other replicas in a 'worker' job of a JobGroup.")
    env = {**request.env, **xp.attempt_env(request.attempt, checkpoint)}  # xcore's own variables win
    container: dict[str, Any] = {"image_uri": exe.image_uri, "args": list(request.args),
                                 "env": [{"name": k, "value": literal(v)} for k, v in env.items()]}
    if exe.command:
        container["command"] = list(exe.command)
    spec: dict[str, Any] = {"container_spec": container, "machine_spec": machine_spec, "replica_count": replicas}
    if executor.boot_disk_type or executor.boot_disk_size_gb:
        spec["disk_spec"] = {"boot_disk_type": executor.boot_disk_type or "pd-ssd",
                             "boot_disk_size_gb": executor.boot_disk_size_gb or 100}
    return spec


def spread_hosts(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A multi-host GPU chief (``h100='8x2'``): Vertex's first pool runs one replica, so the
    other hosts, same machine and container, become worker pool 1."""
    first = specs[0]
    if len(specs) > 1 and specs[1]:
        raise xp.ConfigurationError(
            f"A multi-host GPU chief ({first['replica_count']} hosts) fills Vertex worker pools 0 and 1, and this "
            "JobGroup also has a job in pool 1 ('worker'); give the chief one host or drop that job.")
    return [{**first, "replica_count": 1}, {**first, "replica_count": first["replica_count"] - 1}, *specs[2:]]


def _default(executor: Vertex, target: Target, field: str) -> Any:
    value = getattr(executor, field)
    return value if value not in (None, {}) else target.defaults.get(field, getattr(target, field, None))


def checkpoint_dir(requests: Sequence[xp.LaunchRequest]) -> str | None:
    """One work unit's ``XCORE_CHECKPOINT_DIR``, shared by all its worker pools and attempts
    (a function of the bucket, experiment and unit only): the bucket its jobs' executors name."""
    named = [e for e in (typing.cast(Vertex, r.executor) for r in requests) if e.checkpoint_bucket]
    buckets = sorted({str(e.checkpoint_bucket) for e in named})
    if len(buckets) > 1:
        raise xp.ConfigurationError(f"The jobs of one JobGroup name different Vertex checkpoint buckets "
                                    f"({', '.join(buckets)}): give them one.")
    return named[0].checkpoint_dir(requests[0].experiment_id, requests[0].work_unit_id) if named else None


def custom_job(requests: Sequence[xp.LaunchRequest], target: Target, store: str, title: str,
               request_id: str) -> dict[str, Any]:
    """The CustomJob for one work unit (one request, or a JobGroup's requests). Job-wide fields
    (scheduling, service account, TensorBoard...) come from the executor of pool 0, the chief."""
    pools = pool_order(requests)
    executor: Vertex = requests[pools.index(0)].executor  # type: ignore[assignment]
    specs: list[dict[str, Any]] = [{} for _ in range(max(pools) + 1)]
    checkpoint = checkpoint_dir(requests)
    for request, pool in zip(requests, pools, strict=True):
        specs[pool] = worker_pool(request, pool, checkpoint)
    if len(requests) > 1:  # which pool each role is: Vertex's CLUSTER_SPEC names pools, not roles
        roles = json.dumps({r.job_name: f"workerpool{p}" for r, p in zip(requests, pools, strict=True)},
                           separators=(",", ":"))
        for spec in specs:
            if spec and not any(e["name"] == "XCORE_ROLE_POOLS" for e in spec["container_spec"]["env"]):
                spec["container_spec"]["env"].insert(0, {"name": "XCORE_ROLE_POOLS", "value": literal(roles)})
    if specs[0].get("replica_count", 1) > 1 and "tpu_topology" not in specs[0]["machine_spec"]:
        specs = spread_hosts(specs)
    job_spec: dict[str, Any] = {"worker_pool_specs": specs}
    scheduling: dict[str, Any] = {}
    if executor.timeout_secs:
        scheduling["timeout"] = datetime.timedelta(seconds=executor.timeout_secs)
    if executor.restart_job_on_worker_restart:
        scheduling["restart_job_on_worker_restart"] = True
    if executor.scheduling != "standard":
        scheduling["strategy"] = STRATEGY[executor.scheduling]
    if executor.max_wait_secs:
        scheduling["max_wait_duration"] = datetime.timedelta(seconds=executor.max_wait_secs)
    if scheduling:
        job_spec["scheduling"] = scheduling
    service_account = _default(executor, target, "service_account")
    if service_account:
        job_spec["service_account"] = service_account
    network = _default(executor, target, "network")
    if network:
        job_spec["network"] = network
    output = executor.base_output_dir or (executor.tensorboard and executor.tensorboard.base_output_directory)
    if output:
        job_spec["base_output_directory"] = {"output_uri_prefix": output}
    if executor.tensorboard:
        if not service_account:
            raise xp.ConfigurationError("Vertex TensorBoard needs a service account: set Vertex(service_account=...) "
                                        "or service_account in the target.")
        job_spec["tensorboard"] = executor.tensorboard.name
    if executor.enable_web_access:
        job_spec["enable_web_access"] = True
    first = requests[0]
    labels = {**target.defaults.get("labels", {}), **executor.labels,
              LABEL_STORE: store, LABEL_EXPERIMENT: str(first.experiment_id), LABEL_UNIT: str(first.work_unit_id),
              LABEL_REQUEST: request_id}
    name = f"{label_value(title) or 'xcore'}-{first.experiment_id}-{first.work_unit_id}"
    return {"display_name": name[:128], "job_spec": job_spec, "labels": labels}


def location_of(executor: Vertex) -> str | None:
    """``Vertex(location=...)``, else XManager's ``JobRequirements(location=...)``, else the target's."""
    return executor.location or executor.requirements.location


def plan(requests: Sequence[xp.LaunchRequest], store: str, title: str,
         resolve_target: Any) -> list[PlannedJob | tuple[list[xp.LaunchRequest], str]]:
    """Group requests by work unit and build each CustomJob; a unit that cannot be built
    comes back as (requests, reason)."""
    units: dict[tuple[int, int], list[xp.LaunchRequest]] = {}
    for request in requests:
        units.setdefault((request.experiment_id, request.work_unit_id), []).append(request)
    planned: list[PlannedJob | tuple[list[xp.LaunchRequest], str]] = []
    for unit in units.values():
        executor: Vertex = unit[0].executor  # type: ignore[assignment]
        try:
            executors = [typing.cast(Vertex, r.executor) for r in unit]
            places = {(e.target, e.project, location_of(e)) for e in executors}
            if len(places) > 1:
                raise xp.ConfigurationError(
                    "The jobs of one JobGroup must use the same Vertex target, project and location.")
            target = resolve_target(executor.target, executor.project, location_of(executor))
            request_id = new_request_id()
            body = custom_job(unit, target, store, title, request_id)
            pools = pool_order(unit)
        except xp.XcoreError as exc:
            planned.append((unit, str(exc)))
            continue
        planned.append(PlannedJob(body, list(zip(unit, pools, strict=True)), target.project, target.location,
                                  request_id, target))
    return planned
