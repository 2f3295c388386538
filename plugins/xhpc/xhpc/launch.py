"""Launching: group requests into array jobs, stage what is missing, submit once.

Per group of requests sharing (cluster, executable, executor):

1. one command: create the staging directories, print the absolute staging path, and list
   which content-addressed artifacts the cluster lacks;
2. upload only those (SFTP on the same connection);
3. one command that unpacks the run files (job script + ``tasks.bin``) from stdin, unpacks
   new artifacts safely, and submits each chunk with "submit once" semantics (see
   ``_CHUNK``): an attempt claims a chunk atomically before submitting it and writes the
   outcome to ``chunk-K.id`` (or ``chunk-K.err``). A retry after a dropped connection never
   submits a chunk another attempt claimed, even while that attempt is still running on the
   cluster: it waits for that attempt's outcome and reports it, so every submitted job is
   recorded. A reply lost for good is recovered later by the status hook from the same files.
"""

from __future__ import annotations

import functools
import io
import json
import os
import secrets
import shlex
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from xcore.plugin import (
    ATTEMPT_VAR,
    CHECKPOINT_VAR,
    LaunchContext,
    LaunchError,
    LaunchFailure,
    LaunchRequest,
    attempt_env,
    checkpoint_dir,
)
from xhpc import array_limits, config, retries, scripts, staging_roots
from xhpc.config import Cluster
from xhpc.executables import ClusterExecutable
from xhpc.executors import ClusterExecutor, Slurm, with_defaults
from xhpc.handles import ClusterHandle, GridEngineHandle, SlurmHandle
from xhpc.schedulers import ANY_TASK, SCHEDULERS, Chunk, Scheduler
from xhpc.transport import ClusterConnectionError, RemoteCommandError, Transport, connect, retrying

CHUNK_MARK = "@@XHPC-CHUNK"

# Unpacks an artifact once: refuses links, devices, absolute paths and '..' (no path traversal).
_EXTRACT = r"""
xhpc_extract() {
    local archive=$1 dest=$2 tmp
    [ -d "$dest" ] && return 0
    if tar -tvzf "$archive" | grep -qv '^[-d]'; then
        echo "xhpc: $archive holds links or special files" >&2; return 1
    fi
    if tar -tzf "$archive" | grep -qE '(^/|(^|/)\.\.(/|$))'; then
        echo "xhpc: $archive has unsafe paths" >&2; return 1
    fi
    tmp=$(mktemp -d "$dest.tmp.XXXXXX") || return 1
    if tar -xzf "$archive" -C "$tmp" --no-same-owner --no-same-permissions; then
        chmod 700 "$tmp"; mv -T "$tmp" "$dest" 2>/dev/null || rm -rf "$tmp"
    else
        rm -rf "$tmp"; return 1
    fi
}
"""


# Submit-once per chunk. ``mkdir`` is atomic on every file system (NFS included), so exactly
# one attempt claims chunk K; the others wait for the claimer's outcome instead of submitting.
# The claimer ignores SIGHUP/SIGPIPE, so it finishes and records what it submitted even after
# the connection that started it is gone. The wait is bounded: a claimer that died between
# claim and outcome leaves the chunk "unconfirmed" (the status hook keeps looking for its id).
_CHUNK = r"""
XHPC_WAIT_UNTIL=$((SECONDS + {wait}))
xhpc_nl=$'\n'
xhpc_claim() {{ mkdir "chunk-$1.claim" 2>/dev/null; }}
xhpc_record() {{  # the claimer: record the outcome for other attempts, report it from memory
    if [ "$2" = 0 ]; then
        printf '%s\n' "$3" > "chunk-$1.id.tmp" && mv -f "chunk-$1.id.tmp" "chunk-$1.id"
        echo "{mark} $1 ok ${{3##*$xhpc_nl}}"  # the id is the last line; warnings come first
    else
        printf '%s' "${{3//$xhpc_nl/ }}" > "chunk-$1.err.tmp"; mv -f "chunk-$1.err.tmp" "chunk-$1.err"
        echo "{mark} $1 error ${{3//$xhpc_nl/ }}"
    fi
}}
xhpc_report() {{  # another attempt claimed the chunk: wait for its outcome
    while [ ! -s "chunk-$1.id" ] && [ ! -e "chunk-$1.err" ] && [ "$SECONDS" -lt "$XHPC_WAIT_UNTIL" ]; do
        sleep 0.1 2>/dev/null || sleep 1
    done
    if [ -s "chunk-$1.id" ]; then echo "{mark} $1 ok $(tail -n 1 "chunk-$1.id")"
    elif [ -e "chunk-$1.err" ]; then echo "{mark} $1 error $(cat "chunk-$1.err")"
    else echo "{mark} $1 unconfirmed"; fi
}}
"""
CLAIM_WAIT_SECONDS = 240  # below the submit command's timeout (300 s)


@attrs.define
class GroupResult:
    handles: list[ClusterHandle | LaunchFailure]
    submitted: bool
    error: str | None = None


def launch(requests: Sequence[LaunchRequest], context: LaunchContext) -> list[ClusterHandle | LaunchFailure]:
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    clusters: dict[tuple[Any, ...], tuple[Cluster, ClusterExecutor]] = {}
    resolved: dict[tuple[Any, ...], tuple[Cluster, ClusterExecutor]] = {}
    exe_keys: dict[int, tuple[Any, str]] = {}  # id -> (object kept alive, key)
    executor_keys: dict[int, tuple[Any, tuple[Any, ...]]] = {}
    # A sweep repeats one (executor, executable) pair: checked and keyed once, then each
    # further request is one dict lookup (the objects stay referenced, so ids are not reused).
    pairs: dict[tuple[int, int], tuple[Any, Any, tuple[Any, ...]]] = {}
    keys_of: dict[int, tuple[Any, ...]] = {}  # xcore job id -> its group's key (dependencies name them)
    units = Counter((r.experiment_id, r.work_unit_id) for r in requests)
    gangs = {unit for unit, count in units.items() if count > 1}
    for i, request in enumerate(requests):
        known = pairs.get((id(request.executor), id(request.executable)))
        unit = (request.experiment_id, request.work_unit_id)
        if known is not None and unit not in gangs and known[2][-1] == request.retry and request.depends_on:
            key = (*known[2], _dependency_key(request, keys_of))  # a dependent: grouped with the like of it only
            groups[key].append(i)
            clusters[key] = clusters[known[2]]
            keys_of[request.job_id] = key
            continue
        if known is not None and unit not in gangs and known[2][-1] == request.retry:
            groups[known[2]].append(i)
            keys_of[request.job_id] = known[2]
            continue
        executor = request.executor
        if not isinstance(executor, ClusterExecutor):
            raise LaunchError(f"xhpc cannot launch on {type(executor).__name__}.")
        if not isinstance(request.executable, ClusterExecutable):
            raise LaunchError(
                f"Job {request.job_name!r}: {type(request.executable).__name__} was packaged for another executor; "
                f"package it for {type(executor).__name__}.Spec()."
            )
        if id(executor) not in executor_keys:
            executor_keys[id(executor)] = (executor, (type(executor), executor.group_key()))
        ekey = executor_keys[id(executor)][1]
        if ekey not in resolved:
            cluster = config.resolve(executor.cluster, executor.SCHEDULER)
            if executor.local:
                cluster = cluster.as_local()
            resolved[ekey] = (cluster, with_defaults(executor, cluster.defaults))
        cluster, effective = resolved[ekey]
        if id(request.executable) not in exe_keys:
            exe_keys[id(request.executable)] = (request.executable, _exe_key(request.executable))
        # One array per retry policy: its directives and job script follow the policy.
        key = (cluster.name, cluster.is_local, exe_keys[id(request.executable)][1], ekey, request.retry)
        if unit in gangs:  # a gang's dependencies are its first role's (see _dependency_plan)
            key = _gang_key(key, unit, cluster, request, context)
            if key[-1] == "gang" and key in clusters:  # a further role: the allocation is the first role's
                groups[key].append(i)
                keys_of[request.job_id] = key
                continue
        else:
            pairs[(id(executor), id(request.executable))] = (executor, request.executable, key)
            clusters[key] = (cluster, effective)
            if request.depends_on:
                key = (*key, _dependency_key(request, keys_of))
        groups[key].append(i)
        clusters[key] = (cluster, effective)
        keys_of[request.job_id] = key

    split = Counter(key[3] for key in groups if key[-1] == "gang")
    for experiment_id, unit in sorted(u for u, n in split.items() if n > 1):
        context.progress.message(
            f"xhpc: the jobs of work unit {experiment_id}/{unit} run different executables or clusters: they "
            "start as separate allocations, not as one gang (package them as one executable; docs/gangs.md)")
    handles: list[ClusterHandle | LaunchFailure | None] = [None] * len(requests)
    stats: dict[str, Any] = {"groups": 0, "tasks": 0, "artifact_bytes_uploaded": 0, "artifacts_uploaded": 0,
                             "remote_commands": 0,
             "seconds": 0.0}
    started = time.perf_counter()
    errors: list[str] = []
    any_submitted = False
    done: dict[int, ClusterHandle | LaunchFailure] = {}  # xcore job id -> its outcome, for dependents
    for key, all_indices in groups.items():
        cluster, executor = clusters[key]
        scheduler = SCHEDULERS[cluster.scheduler]
        gang = key[-1] == "gang"
        for indices, dependency in _dependency_plan(scheduler, [requests[i] for i in all_indices], all_indices,
                                                    done, array_limits.limit(cluster, context.state_dir), gang):
            group = [requests[i] for i in indices]
            transport = connect(cluster)
            before = (transport.bytes_uploaded, transport.calls)
            try:
                if dependency.startswith("!"):  # a dependency that was never submitted
                    raise LaunchError(dependency[1:])
                try:
                    result = _launch_group(cluster, executor, group, transport, context, stats, dependency, gang)
                except _Restart:  # the remembered staging path was stale (nothing was submitted)
                    result = _launch_group(cluster, executor, group, transport, context, stats, dependency, gang)
            except (LaunchError, OSError, ValueError) as exc:
                hint = (f" (the {len(group)} jobs of a JobGroup start together as ONE allocation: their tasks, "
                        "CPUs and memory add up; docs/gangs.md)") if gang else ""
                result = GroupResult([], False, str(exc) + hint)
            stats["remote_commands"] += transport.calls - before[1]
            if not result.submitted and not result.handles:
                errors.append(result.error or "unknown error")
                result.handles = [LaunchFailure(result.error or "submission failed") for _ in group]
            any_submitted = any_submitted or result.submitted
            for i, handle in zip(indices, result.handles, strict=True):
                handles[i] = handle
                done[requests[i].job_id] = handle
            stats["groups"] += 1
            stats["tasks"] += len(group)
    stats["seconds"] = round(time.perf_counter() - started, 4)
    _write_stats(context.state_dir, stats)
    if not any_submitted:
        raise LaunchError("; ".join(dict.fromkeys(errors)))
    return [h for h in handles if h is not None]


def _dependency_key(request: LaunchRequest, keys_of: dict[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    """What a dependent's group adds to its key: requests that each wait for one task of the
    same array (or of the same group of this launch) may be one array paired task for task
    (``_dependency_plan``); any other dependent is a group of its own."""
    if len(request.depends_on) == 1:
        dep = request.depends_on[0]
        if dep.handle is None and dep.job_id in keys_of:
            return ("paired", keys_of[dep.job_id], dep.when)
        if isinstance(dep.handle, ClusterHandle):
            return ("paired", dep.handle.cluster, dep.handle.job_id, dep.when)
    return ("own", request.job_id)


def _dependency_plan(scheduler: Scheduler, group: list[LaunchRequest], indices: list[int],
                     done: dict[int, ClusterHandle | LaunchFailure], limit: int,
                     gang: bool = False) -> list[tuple[list[int], str]]:
    """How a group is submitted: ``(indices, dependency option)`` per submission. The whole group
    at once when it waits for nothing, or when task i waits for task i of one array (Slurm
    ``aftercorr``, Grid Engine ``-hold_jid_ad``), or when it is a gang (one allocation waiting
    for every role's dependencies); else each dependent alone with its own dependencies. A
    dependency that was not submitted gives ``"!reason"``."""
    if not any(request.depends_on for request in group):
        return [(indices, "")]
    if gang:
        every: dict[tuple[str, int, str], None] = {}
        for request in group:
            for dep in request.depends_on:
                handle = dep.handle if dep.handle is not None else done.get(dep.job_id)
                if not isinstance(handle, ClusterHandle):
                    return [(indices, f"!dependency {dep.name} was not submitted")]
                every[(handle.job_id, handle.task, dep.when)] = None
        return [(indices, scheduler.after(list(every)))]
    found: list[list[tuple[str, int, str]] | str] = []
    for request in group:
        deps: list[tuple[str, int, str]] = []
        for dep in request.depends_on:
            handle = dep.handle if dep.handle is not None else done.get(dep.job_id)
            if not isinstance(handle, ClusterHandle):
                deps = []
                found.append(f"!dependency {dep.name} was not submitted")
                break
            deps.append((handle.job_id, handle.task, dep.when))
        else:
            found.append(deps)
    base = scheduler.task_base
    single = [entry[0] for entry in found if not isinstance(entry, str) and len(entry) == 1]
    if len(single) == len(group) > 1 and len(group) <= limit and len({job for job, _, _ in single}) == 1 and all(
            task == base + position for position, (_, task, _) in enumerate(single)):
        paired = scheduler.paired(single[0][0], single[0][2])
        if paired is not None:
            return [(indices, paired)]
    return [([i], entry if isinstance(entry, str) else scheduler.after(entry)) for i, entry in zip(indices, found,
                                                                                                   strict=True)]


_warned: set[str] = set()


def _gang_key(key: tuple[Any, ...], unit: tuple[int, int], cluster: Cluster, request: LaunchRequest,
              context: LaunchContext) -> tuple[Any, ...]:
    """The group of a JobGroup's job: on Slurm, one per work unit (its roles start together as
    one allocation); on Grid Engine, the usual one (no gang: said once per process)."""
    if cluster.scheduler == "slurm":
        return (cluster.name, cluster.is_local, key[2], unit, "gang")
    if "sge" not in _warned:
        _warned.add("sge")
        context.progress.message(
            "xhpc: Grid Engine has no gangs: the jobs of a JobGroup are submitted as separate jobs and may "
            "start at different times (docs/gangs.md)")
    return key


def _exe_key(executable: ClusterExecutable) -> str:
    """Equal for executables that package the same thing (requests share them by value)."""
    return json.dumps([type(executable).__qualname__, attrs.asdict(executable)], sort_keys=True, default=str)


def _write_stats(state_dir: Path, stats: dict[str, Any]) -> None:
    """Figures for benchmarks and tests: replaced whole, but not flushed to disk (an fsync here
    would make every launch wait for the disk for a file nothing depends on)."""
    path = state_dir / "last_launch.json"
    tmp = path.with_name(f".last_launch.{os.getpid()}.tmp")
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(stats))
        os.replace(tmp, path)
    except OSError:
        pass


class _Restart(Exception):
    """The cluster's staging directory is no longer where it was remembered: start over."""


_GUARD_MARK = "@@XHPC-GUARD"


def _guard(staging: str, root: str, executable: ClusterExecutable) -> str:
    """Shell that runs before anything is submitted: enter the staging directory, confirm it is
    the remembered absolute path and that every artifact is there (unpacked, or uploaded and
    about to be); otherwise say what is wrong and stop (exit 0, nothing claimed or submitted)."""
    q = shlex.quote
    files = sorted({(a.sha256, a.sha256 + _suffix(a)) for a in executable.artifacts})
    # The directories exist after the first launch (``_prepare`` made them private): then the
    # guard is shell builtins only, no process.
    return (
        f"umask 077\ncd {_sp(staging)} 2>/dev/null && [ -d artifacts ] && [ -d runs ] || "
        f"{{ mkdir -p {_sp(staging)}/artifacts {_sp(staging)}/runs && cd {_sp(staging)} && "
        "chmod 700 artifacts runs || exit 1; }\n"
        f"[ \"$PWD\" = {q(root)} ] || {{ echo \"{_GUARD_MARK} moved $PWD\"; exit 0; }}\n"
        "xhpc_missing=\n"
        + "".join(f"[ -e artifacts/{s} ] || [ -s artifacts/{f} ] || {{ echo '{_GUARD_MARK} missing {s}'; "
                  "xhpc_missing=1; }\n" for s, f in files)
        + "[ -z \"$xhpc_missing\" ] || exit 0\n"
    )


def _guard_outcome(out: str) -> tuple[str | None, set[str]] | None:
    """None when the guard passed; else (the new staging path or None, the missing artifacts)."""
    moved: str | None = None
    missing: set[str] = set()
    stopped = False
    for line in out.splitlines():
        if line.startswith(_GUARD_MARK):
            stopped = True
            _, what, value = line.split(" ", 2)
            if what == "moved":
                moved = value
            else:
                missing.add(value.strip())
    return (moved, missing) if stopped else None


def _prepare(cluster: Cluster, transport: Transport, context: LaunchContext, shas: list[str],
             staging: str) -> tuple[str, set[str]]:
    """Create the staging directories; learn their absolute path, the array limit and which
    artifacts the cluster lacks (one idempotent command, retried on drops)."""
    # umask 077: what xcore creates on the cluster (tasks.bin holds env secrets) is private to the user.
    check = (
        f"umask 077 && mkdir -p {_sp(staging)}/artifacts {_sp(staging)}/runs && cd {_sp(staging)} && "
        "chmod 700 artifacts runs && pwd && "
        + "".join(f"[ -e artifacts/{s} ] || echo missing {s}; " for s in shas)
        + "true" + array_limits.query(cluster, context.state_dir)
    )
    result = retrying(lambda: transport.check(check, "Preparing the staging directory"))
    lines = result.out.strip().splitlines()
    array_limits.learn(cluster, context.state_dir, lines)
    if not lines:
        raise LaunchError(f"Cluster {cluster.name!r}: the staging directory {staging} could not be resolved.")
    root = lines[0].strip()
    staging_roots.remember(cluster, context.state_dir, root)
    return root, {line.split()[1] for line in lines[1:] if line.startswith("missing ")}


def _suffix(artifact: Any) -> str:
    return ".tar.gz" if artifact.kind == "archive" else Path(artifact.local_path).suffix


def _upload(cluster: Cluster, transport: Transport, context: LaunchContext, stats: dict[str, Any],
            executable: ClusterExecutable, root: str, missing: set[str]) -> list[tuple[Any, str]]:
    """Upload the artifacts the cluster lacks (each streamed to a temporary name, then renamed)."""
    uploads = []
    for artifact in executable.artifacts:
        if artifact.sha256 in missing:
            remote = f"{root}/artifacts/{artifact.sha256}{_suffix(artifact)}"
            context.progress.update(f"uploading {artifact.size / 1e6:.1f} MB to {cluster.name}")
            retrying(functools.partial(transport.put, artifact.local_path, remote))
            stats["artifact_bytes_uploaded"] += artifact.size
            stats["artifacts_uploaded"] += 1
            uploads.append((artifact, remote))
            missing.discard(artifact.sha256)
    return uploads


def _handle_cls(cluster: Cluster) -> type[ClusterHandle]:
    return GridEngineHandle if cluster.scheduler == "sge" else SlurmHandle


def _launch_group(cluster: Cluster, executor: ClusterExecutor, group: list[LaunchRequest], transport: Transport,
                  context: LaunchContext, stats: dict[str, Any], dependency: str = "",
                  gang: bool = False) -> GroupResult:
    scheduler = SCHEDULERS[cluster.scheduler]
    executable: ClusterExecutable = group[0].executable  # type: ignore[assignment]
    first = group[0]
    run_name = f"e{first.experiment_id}-j{first.job_id}-{secrets.token_hex(3)}"
    staging = cluster.staging.rstrip("/") or "/"
    shas = sorted({a.sha256 for a in executable.artifacts})

    # 1. staging dirs, absolute path, missing artifacts: skipped when this cluster's staging
    # path and array limit are remembered; the submission (3.) then checks them itself, so
    # an unchanged relaunch is ONE remote command.
    root = staging_roots.get(cluster, context.state_dir)
    uploads: list[tuple[Any, str]] = []
    if root is None or array_limits.query(cluster, context.state_dir):
        root, missing = _prepare(cluster, transport, context, shas, staging)
        uploads += _upload(cluster, transport, context, stats, executable, root, missing)

    # 2. run files + submission (one command; it uploads nothing twice and submits once).
    run_dir = f"{root}/runs/{run_name}"
    cwd = executor.workdir or (f"{root}/artifacts/{executable.package}"
                               if executable.cwd_in_package and executable.package
                               else run_dir)
    command, env = _command_and_env(cluster, executor, executable, root, cwd,
                                    sorted({k for r in group for k in r.env} | {ATTEMPT_VAR, CHECKPOINT_VAR}))
    # Each task's attempt number and checkpoint directory (XCORE_ATTEMPT is counted on from it
    # by the job script) come after its own variables: xcore sets them.
    tasks = _Tasks(group, root)
    common = {**env, **scripts.common_env(tasks)}
    data, offsets = scripts.encode_tasks(cwd, command, common, tasks)
    name = executor.job_name or _default_name(context, first)
    plan = retries.plan(first.retry, executor.time_limit, executor.signal_before_limit)
    files = _scripts(cluster, executor, group, name, run_dir, offsets, gang, plan)
    limit = array_limits.limit(cluster, context.state_dir)
    chunks = [Chunk(k, off, min(limit, len(group) - off)) for k, off in enumerate(range(0, len(group), limit))]
    if gang:  # one allocation for every role, whatever the array limit
        chunks = [Chunk(0, 0, len(group))]
    submitted_at = time.time()
    # Which xcore job is which task: lets a later process adopt them if this launcher dies (adoption.py).
    adoption = {"job_ids": [r.job_id for r in group], "chunks": [[c.index, c.offset, c.count] for c in chunks],
                "submitted_at": submitted_at, "gang": gang, "attempts": [r.attempt for r in group],
                # variables xcore added to tasks.bin (not the job's own): env() leaves them out
                "backend_env": sorted(set(env) - {k for r in group for k in r.env})}
    files.update({"tasks.bin": data, "xcore-jobs.json": json.dumps(adoption).encode()})
    compressed = sum(len(content) for content in files.values()) > COMPRESS_ABOVE
    payload = _tar(files, compressed)

    def submit_script() -> str:
        return _guard(staging, root, executable) + _submit_script(
            scheduler, run_dir, root, uploads, executable, chunks, executor.max_parallel_tasks,
            scripts.job_name(f"{name}-{run_name}"), compressed, dependency=dependency, array=not gang)

    chunk_ids: dict[int, str] = {}
    chunk_errors: dict[int, str] = {}
    unconfirmed: set[int] = set()
    lost: str | None = None
    try:
        result = retrying(lambda: transport.run(submit_script(), stdin=payload, timeout=300))
        guard = _guard_outcome(result.out)
        if guard is not None:  # nothing was submitted: the staging path moved or artifacts are missing
            moved, missing = guard
            if moved is not None:
                staging_roots.forget(cluster, context.state_dir)
                raise _Restart()
            uploads += _upload(cluster, transport, context, stats, executable, root, missing)
            result = retrying(lambda: transport.run(submit_script(), stdin=payload, timeout=300))
            if _guard_outcome(result.out) is not None:
                raise LaunchError(f"Cluster {cluster.name!r}: artifacts vanished from {root} during the launch.")
        _read_outcomes(scheduler, result.out, result.err, chunk_ids, chunk_errors, unconfirmed)
        if not chunk_ids and not chunk_errors and not unconfirmed:
            raise RemoteCommandError(
                f"Submitting to cluster {cluster.name!r} failed (exit {result.returncode}): "
                f"{result.err or result.out.strip()}"
            )
        refused = [c for c in chunks if array_limits.too_large(cluster, chunk_errors.get(c.index, ""))]
        if refused and not cluster.max_array_size:
            def resubmit(again: list[Chunk], adoption_json: bytes) -> str:
                return _submit_script(scheduler, run_dir, root, [], executable, again, executor.max_parallel_tasks,
                                      scripts.job_name(f"{name}-{run_name}"), compressed, adoption_json,
                                      dependency=dependency)

            chunks = _split_again(cluster, transport, context, chunks, refused, adoption, resubmit, payload,
                                  (scheduler, chunk_ids, chunk_errors, unconfirmed))
    except ClusterConnectionError as exc:
        if not exc.retryable:
            raise
        lost = str(exc)  # the command may have run: the status hook reads chunk-K.id later

    cls = _handle_cls(cluster)
    handles: list[ClusterHandle | LaunchFailure] = []
    name_, local, base, logs = cluster.name, cluster.is_local, scheduler.task_base, f"{run_dir}/logs/"
    for chunk in chunks:
        job_id = chunk_ids.get(chunk.index, "")
        error = chunk_errors.get(chunk.index)
        if lost is None and not job_id and error is None and chunk.index not in unconfirmed:
            error = "the scheduler printed no job id"
        if error:
            handles += [LaunchFailure(f"submission failed: {error}")] * chunk.count
            continue
        number, offset = chunk.index, chunk.offset
        if gang:  # not an array: every role is the whole job (status, cancel), with its own log
            base = ANY_TASK
        handles += [cls(cluster=name_, job_id=job_id, task=base + t * (not gang), index=offset + t, run_dir=run_dir,
                        log_path=f"{logs}{offset + t}.log", local=local, submitted_at=submitted_at, chunk=number,
                        attempt=group[offset + t].attempt)
                    for t in range(chunk.count)]
    if not chunk_ids and lost is None and not unconfirmed:
        raise LaunchError(f"Submitting to cluster {cluster.name!r} failed: "
                          + "; ".join(dict.fromkeys(chunk_errors.values())))
    if chunk_ids:
        context.progress.update(
            f"submitted {len(group)} tasks to {cluster.name} as {cluster.scheduler} job(s) "
            + ", ".join(chunk_ids[k] for k in sorted(chunk_ids))
        )
    return GroupResult(handles, True, None)


class _Tasks(Sequence[scripts.Task]):
    """The group's tasks, each built when read: 100,000 tasks' variables (their attempt and
    checkpoint directory) held at once were ~40 MiB of the launcher's peak (issue 31)."""

    def __init__(self, group: Sequence[LaunchRequest], root: str) -> None:
        self._group, self._root = group, root
        self._checkpoints: dict[int, str] = {}  # experiment id -> its checkpoint directory

    def __len__(self) -> int:
        return len(self._group)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._task(r) for r in self._group[index]]
        return self._task(self._group[index])

    def __iter__(self) -> Iterator[scripts.Task]:
        return map(self._task, self._group)

    def _task(self, r: LaunchRequest) -> scripts.Task:
        experiment = self._checkpoints.get(r.experiment_id)
        if experiment is None:  # the units' directories differ only in their last part
            experiment = self._checkpoints[r.experiment_id] = checkpoint_dir(self._root, r.experiment_id, 0)[:-2]
        return scripts.Task(r.args, {**r.env, **attempt_env(r.attempt, f"{experiment}/{int(r.work_unit_id)}")})


def _scripts(cluster: Cluster, executor: ClusterExecutor, group: list[LaunchRequest], name: str, run_dir: str,
             offsets: list[int], gang: bool, plan: retries.Plan | None = None) -> dict[str, bytes]:
    """``job.sh``, plus ``role.sh`` where the job runs as srun steps (replicas, distributed, a gang).
    ``plan``: the retry plan of an array's job script (a gang's roles export the attempt only)."""
    if not gang and not scripts.needs_steps(executor):
        return {"job.sh": scripts.job_script(executor, name, run_dir, offsets, plan).encode()}
    if not isinstance(executor, Slurm):
        raise LaunchError(f"Job {group[0].job_name!r}: replicas and distributed= need Slurm (srun); on Grid "
                          "Engine run one job per process or ask your admins for a parallel environment "
                          "(docs/gangs.md).")
    if gang:
        roles = [scripts.role_of(with_defaults(r.executor, cluster.defaults), r.job_name, i)  # type: ignore[arg-type]
                 for i, r in enumerate(group)]
    else:
        roles = [scripts.role_of(executor, group[0].job_name, 0)]
    return {"job.sh": scripts.launcher_script(executor, name, run_dir, roles).encode(),
            "role.sh": scripts.role_script(executor, run_dir, offsets, plan).encode()}


def _read_outcomes(scheduler: Scheduler, out: str, err: str, chunk_ids: dict[int, str],
                   chunk_errors: dict[int, str], unconfirmed: set[int]) -> None:
    """Each chunk's outcome from the submission's output: its job id, error or 'unconfirmed'."""
    for line in out.splitlines():
        if line.startswith(CHUNK_MARK):
            _, k, status, *rest = line.split(" ", 3)
            if status == "ok":
                chunk_ids[int(k)] = scheduler.parse_job_id(rest[0] if rest else "")
            elif status == "unconfirmed":
                unconfirmed.add(int(k))  # claimed by an attempt that has not finished: id comes later
            else:
                chunk_errors[int(k)] = " ".join(rest).strip() or err


def _split_again(cluster: Cluster, transport: Transport, context: LaunchContext, chunks: list[Chunk],
                 refused: list[Chunk], adoption: dict[str, Any], resubmit: Any, payload: bytes,
                 outcomes: tuple[Scheduler, dict[int, str], dict[int, str], set[int]]) -> list[Chunk]:
    """The cluster refused arrays within the cached limit, so that limit is stale (it was
    lowered since): read it again and submit the refused chunks' tasks as smaller arrays
    (new chunk numbers, same run directory). Returns the chunks that now make up the run."""
    scheduler, chunk_ids, chunk_errors, unconfirmed = outcomes
    state_dir = context.state_dir
    cached = array_limits.limit(cluster, state_dir)
    array_limits.forget(cluster, state_dir)
    try:
        asked = retrying(lambda: transport.check("true" + array_limits.query(cluster, state_dir),
                                                 "Reading the array size limit"))
    except LaunchError:  # cannot ask: the refusal stands as the scheduler worded it
        return chunks
    array_limits.learn(cluster, state_dir, asked.out.splitlines())
    limit = array_limits.limit(cluster, state_dir)
    largest = max(c.count for c in refused)
    if limit >= largest:  # not a stale limit after all: the refusal stands
        return chunks
    following = max(c.index for c in chunks) + 1
    replaced: dict[int, list[Chunk]] = {}
    for chunk in refused:
        parts = []
        for offset in range(chunk.offset, chunk.offset + chunk.count, limit):
            parts.append(Chunk(following, offset, min(limit, chunk.offset + chunk.count - offset)))
            following += 1
        replaced[chunk.index] = parts
    again = [part for parts in replaced.values() for part in parts]
    now = [part for c in chunks for part in replaced.get(c.index, [c])]
    context.progress.message(
        f"xhpc: cluster {cluster.name} refused an array of {largest} tasks: its array size limit is now {limit}, "
        f"not the {cached} cached; submitting those {sum(c.count for c in refused)} tasks again as "
        f"{len(again)} arrays")
    adoption_json = json.dumps({**adoption, "chunks": [[c.index, c.offset, c.count] for c in now]}).encode()
    for chunk in refused:
        del chunk_errors[chunk.index]
    try:
        result = retrying(lambda: transport.run(resubmit(again, adoption_json), stdin=payload, timeout=300))
    except ClusterConnectionError as exc:
        if not exc.retryable:
            raise
        unconfirmed.update(c.index for c in again)  # as for a lost reply: the status hook reads chunk-K.id
        return now
    _read_outcomes(scheduler, result.out, result.err, chunk_ids, chunk_errors, unconfirmed)
    return now


def _sp(path: str) -> str:
    from xhpc.transport import shell_path

    return shell_path(path)


def _default_name(context: LaunchContext, first: LaunchRequest) -> str:
    title = context.experiment_title or first.job_name
    return f"{title}"


def _command_and_env(cluster: Cluster, executor: ClusterExecutor, executable: ClusterExecutable,
                     root: str, cwd: str = "", env_names: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    env: dict[str, str] = {}
    package_dir = f"{root}/artifacts/{executable.package}" if executable.package else None
    if package_dir:
        env["XHPC_PACKAGE_DIR"] = package_dir
        if executable.pythonpath:
            env["PYTHONPATH"] = package_dir
    command = list(executable.command)
    if executable.container is not None:
        options = executable.container
        image = options.image
        if image.startswith("artifact:"):
            sha = image.removeprefix("artifact:")
            artifact = next(a for a in executable.artifacts if a.sha256 == sha)
            image = f"{root}/artifacts/{sha}{Path(artifact.local_path).suffix}"
        if options.runtime == "docker":
            names = sorted({*env, *(env_names or []), "XHPC_INDEX", "XHPC_RUN"})
            # the checkpoint directories too: XCORE_CHECKPOINT_DIR is the same path inside
            mounts = [p for p in dict.fromkeys([package_dir, cwd, f"{root}/checkpoints"]) if p]
            command = scripts.docker_command(image, command, mounts, options.binds, options.options,
                                             scripts.uses_gpus(executor), cwd, names)
        else:
            command = scripts.container_command(cluster.singularity, image, command, options.binds, options.options,
                                                scripts.uses_gpus(executor),
                                                [p for p in (package_dir, f"{root}/checkpoints") if p])
    if not command:
        raise LaunchError(f"Executable {executable.name!r} has no command to run.")
    return command, env


COMPRESS_ABOVE = 64 * 1024  # run files smaller than this travel as a plain tar (no gzip process remotely)


def _tar(files: dict[str, bytes], compress: bool) -> bytes:
    import tarfile

    raw = io.BytesIO()
    # gzip level 1: tasks.bin of a big sweep shrinks ~5x for a few milliseconds of CPU.
    options: dict[str, Any] = {"mode": "w:gz", "compresslevel": 1} if compress else {"mode": "w"}
    with tarfile.open(fileobj=raw, **options) as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = 0o700 if name.endswith(".sh") else 0o600  # private: tasks.bin holds env secrets
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(content))
    return raw.getvalue()


def _submit_script(scheduler: Scheduler, run_dir: str, root: str, uploads: list[Any], executable: ClusterExecutable,
                   chunks: list[Chunk], max_parallel: int | None, unique_name: str, compressed: bool = True,
                   adoption: bytes | None = None, dependency: str = "", array: bool = True) -> str:
    """The submission, in as few remote processes as it can be (each is a fork and exec on a
    busy login node): one ``mkdir``, one ``tar``, one ``mv`` for the run files, then per chunk
    the claim, the scheduler's submit command and the ``mv`` that records its id."""
    q = shlex.quote
    lines = [
        "trap '' HUP PIPE",  # keep going if the connection drops: the job id still lands in chunk-K.id
        "umask 077",  # run files, job-id files and (Slurm, via the submit umask) logs are private
        _EXTRACT,
        _CHUNK.format(wait=CLAIM_WAIT_SECONDS, mark=CHUNK_MARK),
        # The run directory is filled aside, then renamed into place whole: a retry finds it
        # complete or absent, so it never truncates a tasks.bin that tasks of an earlier
        # attempt are already reading (the attempt that loses the rename drops its copy).
        f"if [ ! -d {q(run_dir)} ]; then",
        f"  xhpc_in={q(run_dir)}.in.$$.$RANDOM$RANDOM",
        f"  mkdir -p \"$xhpc_in\"/logs \"$xhpc_in\"/cancelled && tar -x{'z' if compressed else ''}f - -C \"$xhpc_in\" "
        "|| { rm -rf \"$xhpc_in\"; echo 'xhpc: cannot unpack the run files' >&2; exit 1; }",
        f"  mv -T \"$xhpc_in\" {q(run_dir)} 2>/dev/null || rm -rf \"$xhpc_in\"",
        "fi",
        f"cd {q(run_dir)} || exit 1",
    ]
    if adoption is not None:  # the run's chunks changed (split again): adoption must find the new ones
        lines.append(f"printf '%s' {q(adoption.decode())} > xcore-jobs.json.tmp && "
                     "mv -f xcore-jobs.json.tmp xcore-jobs.json")
    # Uploaded files are made private (an unchanged relaunch uploads nothing and runs no chmod).
    fresh = [f"{root}/artifacts/{artifact.sha256}{_suffix(artifact)}" for artifact, _ in uploads]
    if fresh:
        lines.append(f"chmod 600 {' '.join(q(path) for path in fresh)} 2>/dev/null")
    for artifact in executable.artifacts:
        if artifact.kind == "archive":
            archive = f"{root}/artifacts/{artifact.sha256}.tar.gz"
            lines.append(f"xhpc_extract {q(archive)} {q(root + '/artifacts/' + artifact.sha256)} || exit 1")
        else:
            lines.append(f"mkdir -p {q(root + '/artifacts/' + artifact.sha256)}")
    for chunk in chunks:
        k = chunk.index
        submit = scheduler.submit_command(f"{run_dir}/job.sh", chunk, max_parallel, dependency, array)
        lines.append(f"if xhpc_claim {k}; then out=$({submit} 2>&1); xhpc_record {k} $? \"$out\"; "
                     f"else xhpc_report {k}; fi")
    return "\n".join(lines) + "\n"
