"""Finds what a launcher that died mid-submission got to the cluster (the ``xcore_adopt`` hook).

Every run directory holds ``xcore-jobs.json`` (written with the job script, before any
``sbatch``/``qsub``): the xcore job id of each task and how the tasks were split into array
chunks. One remote command per cluster lists the runs of the wanted experiments with that file
and every ``chunk-K.id`` written so far. A chunk without an id yet gets a handle with an empty
job id: the status hook reads the id later, as after a lost submission reply.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from xcore.plugin import LaunchRequest
from xhpc import config
from xhpc.executors import ClusterExecutor
from xhpc.handles import ClusterHandle, GridEngineHandle, SlurmHandle
from xhpc.schedulers import ANY_TASK, SCHEDULERS
from xhpc.transport import connect, retrying, shell_path

_RUN, _ID = "@@XHPC-RUN", "@@XHPC-ID"


def adopt(requests: Sequence[LaunchRequest]) -> list[ClusterHandle | None]:
    clusters: dict[tuple[str, bool], Any] = {}
    wanted: dict[tuple[str, bool], dict[int, LaunchRequest]] = defaultdict(dict)
    for request in requests:
        executor = request.executor
        if not isinstance(executor, ClusterExecutor):
            return [None] * len(requests)
        cluster = config.resolve(executor.cluster, executor.SCHEDULER)
        if executor.local:
            cluster = cluster.as_local()
        key = (cluster.name, cluster.is_local)
        clusters[key] = cluster
        wanted[key][request.job_id] = request
    found: dict[int, ClusterHandle] = {}
    for key, by_id in wanted.items():
        found.update(_adopt_on(clusters[key], by_id))
    return [found.get(r.job_id) for r in requests]


def _adopt_on(cluster: Any, by_id: dict[int, LaunchRequest]) -> dict[int, ClusterHandle]:
    scheduler = SCHEDULERS[cluster.scheduler]
    cls = GridEngineHandle if cluster.scheduler == "sge" else SlurmHandle
    patterns = " ".join(f"e{e}-*/" for e in sorted({r.experiment_id for r in by_id.values()}))
    command = (
        f"cd {shell_path(cluster.staging.rstrip('/') or '/')}/runs 2>/dev/null || exit 0; pwd; "
        f"for d in {patterns}; do [ -f \"$d/xcore-jobs.json\" ] || continue; "
        f"echo \"{_RUN} ${{d%/}} $(cat \"$d/xcore-jobs.json\")\"; "
        f"for f in \"$d\"chunk-*.id; do "
        f"[ -s \"$f\" ] && echo \"{_ID} ${{d%/}} $(basename \"$f\" .id) $(head -n 1 \"$f\")\"; "
        "done; done; true"
    )
    out = retrying(lambda: connect(cluster).check(command, "Looking for submissions of a stopped launcher")).out
    lines = out.splitlines()
    root = lines[0].strip() if lines else ""
    runs: dict[str, dict[str, Any]] = {}
    ids: dict[tuple[str, int], str] = {}
    for line in lines[1:]:
        if line.startswith(_RUN + " "):
            _, name, data = line.split(" ", 2)
            try:
                runs[name] = json.loads(data)
            except ValueError:
                continue
        elif line.startswith(_ID + " "):
            _, name, chunk, *rest = line.split(" ", 3)
            if chunk.startswith("chunk-") and chunk[6:].isdigit():
                ids[(name, int(chunk[6:]))] = scheduler.parse_job_id(rest[0] if rest else "")
    found: dict[int, ClusterHandle] = {}
    for run_name, run in runs.items():
        run_dir = f"{root}/{run_name}"
        attempts = run.get("attempts") or []
        for index, job_id in enumerate(run.get("job_ids", [])):
            if job_id not in by_id:
                continue
            attempt = attempts[index] if index < len(attempts) else 1
            if attempt != by_id[job_id].attempt:  # another attempt's submission of this job
                continue
            part, offset = next(((k, off) for k, off, count in run["chunks"] if off <= index < off + count), (0, 0))
            found[job_id] = cls(
                cluster=cluster.name, job_id=ids.get((run_name, part), ""),
                task=ANY_TASK if run.get("gang") else scheduler.task_base + index - offset,  # a gang is not an array
                index=index, run_dir=run_dir, log_path=f"{run_dir}/logs/{index}.log", local=cluster.is_local,
                submitted_at=float(run.get("submitted_at", 0.0)), chunk=part, attempt=attempt,
            )
    return found



