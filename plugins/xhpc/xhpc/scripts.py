"""Job scripts and task files: how one array job runs many work units with their own args.

Everything a user controls per task (argv, environment, the command itself) goes into
``tasks.bin`` as NUL-separated data; the job script reads its task's record with
``mapfile -d ''`` and runs ``exec "${cmd[@]}" "${args[@]}"``. Nothing is pasted into shell
text or passed through ``eval``, so quotes, ``$``, backticks, backslashes, newlines and
empty strings reach the program byte for byte. Only scheduler directives, module names and
the executor's ``setup`` commands (shell by design) are script text.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import attrs

from xhpc import retries
from xhpc.executors import ClusterExecutor, GridEngine, Slurm


@attrs.frozen
class Task:
    args: list[str]
    env: dict[str, str]


class TaskLike(Protocol):
    """What a task file needs of a task (a ``Task``, or the launch request itself)."""

    @property
    def args(self) -> Sequence[str]: ...

    @property
    def env(self) -> Mapping[str, str]: ...


def _nul_error(fields: Sequence[str]) -> ValueError:
    value = next(f for f in fields if "\0" in f)
    return ValueError(f"{value[:40]!r}... contains a NUL byte, which no program can receive as an argument.")


def encode_tasks(cwd: str, command: Sequence[str], common_env: Mapping[str, str],
                 tasks: Sequence[TaskLike]) -> tuple[bytes, list[int]]:
    """``tasks.bin`` and the record offsets. Record 0: cwd, len(command), command..., env...;
    record i+1: len(args), args..., env... (``KEY=value``; only what differs from record 0).

    A launch of 10,000 tasks writes 30,000+ fields: records are joined as text, checked for
    NUL bytes and encoded once for the whole file (per record only when it is not ASCII, where
    the byte offsets need each record's encoded length)."""
    head = [cwd, str(len(command)), *command, *(f"{k}={v}" for k, v in common_env.items())]
    texts = ["\0".join(head) + "\0"]
    fields = len(head)
    offsets = [0, len(texts[0])]  # in characters: bytes too while every record is ASCII
    for task in tasks:
        args = task.args
        record = [str(len(args)), *args]
        if task.env:
            record += [f"{k}={v}" for k, v in task.env.items() if common_env.get(k) != v]
        texts.append("\0".join(record) + "\0")
        offsets.append(offsets[-1] + len(texts[-1]))
        fields += len(record)
    text = "".join(texts)
    if text.count("\0") != fields:
        raise _nul_error([*head, *(f for t in tasks for f in (*t.args, *(f"{k}={v}" for k, v in t.env.items())))])
    if text.isascii():
        del texts  # 100,000 records: the pieces, the text and its bytes are not held all at once
        return text.encode("ascii"), offsets
    offsets, total = [0], 0
    encoded = [record_text.encode("utf-8", "surrogateescape") for record_text in texts]
    for chunk in encoded:
        total += len(chunk)
        offsets.append(total)
    return b"".join(encoded), offsets


def common_env(tasks: Iterable[TaskLike]) -> dict[str, str]:
    """The variables every task sets to the same value, in one pass over the tasks (a launch may
    build each task's env as it reads it, rather than hold 100,000 of them)."""
    each = iter(tasks)
    first = next(each, None)
    common = dict(first.env) if first is not None else {}
    for task in each:
        if not common:
            break
        env = task.env
        for key in [k for k, v in common.items() if env.get(k) != v]:
            del common[key]
    return common


def job_name(name: str) -> str:
    """A name every scheduler accepts (SGE rejects spaces, '/', ':' and a leading digit)."""
    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "xcore"
    return clean if not clean[0].isdigit() else f"x{clean}"


def _clock(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _gpu_type(executor: ClusterExecutor) -> tuple[int, str | None]:
    req = executor.requirements
    count = req.accelerator_count if req.accelerator is not None and req.accelerator.is_gpu else 0
    if not count or req.accelerator is None:
        return 0, None
    if isinstance(executor, Slurm) and executor.gpu_type:
        return count, executor.gpu_type
    name = req.accelerator.name
    return count, None if name == "LOCAL_GPU" else name.lower()


def uses_gpus(executor: ClusterExecutor) -> bool:
    return _gpu_type(executor)[0] > 0


def _extra(prefix: str, directives: Sequence[str]) -> list[str]:
    lines = []
    for directive in directives:
        text = directive.strip()
        lines.append(text if text.startswith(prefix) else f"{prefix} {text}")
    return lines


def slurm_directives(executor: Slurm, name: str, run_dir: str, roles: Sequence[Role] = ()) -> list[str]:
    """One task by default; with ``roles`` (replicas or a gang) the allocation holds every
    role's tasks: as many CPUs per task as the largest role asks, the roles' memory summed."""
    tasks = sum(role.tasks for role in roles) or 1
    d = [f"--job-name={job_name(name)}", f"--output={run_dir}/logs/slurm-%A_%a.out", "--open-mode=append",
         f"--ntasks={tasks}"]
    req = executor.requirements
    cpus = max((role.cpus or 1 for role in roles), default=0) if roles else (math.ceil(req.cpu) if req.cpu else 0)
    if cpus and (cpus > 1 or req.cpu):
        d.append(f"--cpus-per-task={cpus}")
    memory = sum((role.memory_mb or 0) * role.tasks for role in roles) if roles else (
        math.ceil(req.memory / 2**20) if req.memory else 0)
    if memory:
        d.append(f"--mem={memory}M")
    count, gtype = _gpu_type(executor)
    if count:
        d.append(f"--gres=gpu:{gtype}:{count}" if gtype else f"--gres=gpu:{count}")
    if executor.time_limit:
        d.append(f"--time={_clock(executor.time_limit)}")
    for flag, value in (("partition", executor.partition), ("account", executor.account), ("qos", executor.qos),
                        ("constraint", executor.constraint)):
        if value:
            d.append(f"--{flag}={value}")
    if executor.exclusive:
        d.append("--exclusive")
    return [f"#SBATCH {x}" for x in d] + _extra("#SBATCH", executor.directives)


def sge_directives(executor: GridEngine, name: str, run_dir: str) -> list[str]:
    d = ["-S /bin/bash", f"-N {job_name(name)}", f"-o {run_dir}/logs/sge-$JOB_ID.$TASK_ID.out", "-j y",
         f"-wd {run_dir}"]
    req = executor.requirements
    slots = math.ceil(req.cpu) if req.cpu else 1
    if req.cpu and (slots > 1 or executor.parallel_environment):
        d.append(f"-pe {executor.parallel_environment or 'smp'} {slots}")
    resources: dict[str, str] = {}
    if req.memory:
        resources[executor.memory_resource] = f"{math.ceil(req.memory / 2**20 / slots)}M"
    count, _ = _gpu_type(executor)
    if count:
        resources[executor.gpu_resource] = str(count)
    if executor.time_limit:
        resources["h_rt"] = str(executor.time_limit)
    if executor.exclusive:
        resources["exclusive"] = "true"
    resources.update(executor.resources)
    for key, value in resources.items():
        d.append(f"-l {key}={value}")
    for flag, setting in (("q", executor.queue), ("P", executor.project), ("A", executor.account)):
        if setting:
            d.append(f"-{flag} {setting}")
    if executor.reserve:
        d.append("-R y")
    return [f"#$ {x}" for x in d] + _extra("#$", executor.directives)


_BODY = r"""
# Generated by xcore-xhpc. This task's args and environment are read from tasks.bin as
# NUL-separated data (mapfile), never evaluated as shell code. umask 077: logs and whatever the
# job writes are private to the user unless the job says otherwise.
umask 077
# SGE's shepherd creates the -o file 0644 whatever the umask (Slurm honours the submit umask).
for XHPC_F in "${{SGE_STDOUT_PATH:-}}" "${{SGE_STDERR_PATH:-}}"; do [ -f "$XHPC_F" ] && chmod 600 -- "$XHPC_F"; done
XHPC_RUN={run_dir}
XHPC_TASK={task_expr}
XHPC_INDEX=$(( ${{1:-0}} + XHPC_TASK ))
exec >>"$XHPC_RUN/logs/$XHPC_INDEX.log" 2>&1
XHPC_OFFSETS=({offsets})
xhpc_record() {{
    local start=${{XHPC_OFFSETS[$1]}} end=${{XHPC_OFFSETS[$1+1]}}
    mapfile -d '' -t XHPC_REC < <(tail -c +$((start + 1)) "$XHPC_RUN/tasks.bin" | head -c $((end - start)))
}}
if [ -z "${{XHPC_OFFSETS[$XHPC_INDEX + 2]:-}}" ]; then
    echo "xhpc: task index $XHPC_INDEX is not in $XHPC_RUN/tasks.bin" >&2; exit 97
fi
xhpc_record 0
XHPC_CWD=${{XHPC_REC[0]}}
XHPC_N=${{XHPC_REC[1]}}
XHPC_CMD=("${{XHPC_REC[@]:2:XHPC_N}}")
for XHPC_KV in "${{XHPC_REC[@]:2+XHPC_N}}"; do export -- "$XHPC_KV"; done
xhpc_record $((XHPC_INDEX + 1))
XHPC_N=${{XHPC_REC[0]}}
XHPC_ARGS=("${{XHPC_REC[@]:1:XHPC_N}}")
for XHPC_KV in "${{XHPC_REC[@]:1+XHPC_N}}"; do export -- "$XHPC_KV"; done
unset XHPC_REC XHPC_N XHPC_KV XHPC_OFFSETS XHPC_F
export XHPC_INDEX XHPC_RUN
{attempts}{modules}{setup}cd -- "$XHPC_CWD" || {{ echo "xhpc: cannot enter $XHPC_CWD" >&2; exit 98; }}
{run}"""
_EXEC = 'exec "${XHPC_CMD[@]}" "${XHPC_ARGS[@]}"\n'


@attrs.frozen
class Role:
    """One role of a Slurm allocation started by ``launcher_body``: a JobGroup member (a gang)
    or the one job of a replicated task. ``index`` is its row in tasks.bin (added to the array
    task's offset for a replicated sweep)."""

    name: str
    index: int
    tasks: int
    cpus: int | None = None
    memory_mb: int | None = None
    framework: str | None = None
    port: int | None = None


def role_of(executor: ClusterExecutor, name: str, index: int) -> Role:
    req = executor.requirements
    dist = executor.distributed
    return Role(name, index, req.replicas, math.ceil(req.cpu) if req.cpu else None,
                math.ceil(req.memory / 2**20) if req.memory else None,
                dist.framework if dist else None, dist.port if dist else None)


def needs_steps(executor: ClusterExecutor) -> bool:
    """A job that runs as ``srun`` task(s) inside its allocation rather than as the batch script."""
    return executor.requirements.replicas > 1 or executor.distributed is not None


# The batch script of a replicated job or a gang: it lays every role's tasks on the
# allocation's task slots (one node name per slot, in Slurm's order), tells each role every
# role's hosts, starts each role as its own step on exactly its slots (SLURM_HOSTFILE with
# the arbitrary distribution), and ends when they all did; the first role that fails stops
# the others (a learner without its actors would wait forever) and gives the exit code.
_LAUNCHER = r"""
umask 077
XHPC_RUN={run_dir}
XHPC_BASE=$(( ${{1:-0}} + ${{SLURM_ARRAY_TASK_ID:-0}} ))
mapfile -t xhpc_nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
xhpc_slots=()
xhpc_i=0
IFS=, read -ra xhpc_counts <<< "$SLURM_TASKS_PER_NODE"
for xhpc_c in "${{xhpc_counts[@]}}"; do
    xhpc_n=${{xhpc_c%%(*}}; xhpc_r=1
    [[ $xhpc_c == *"(x"* ]] && {{ xhpc_r=${{xhpc_c#*(x}}; xhpc_r=${{xhpc_r%)}}; }}
    for ((xhpc_j = 0; xhpc_j < xhpc_r; xhpc_j++)); do
        for ((xhpc_t = 0; xhpc_t < xhpc_n; xhpc_t++)); do xhpc_slots+=("${{xhpc_nodes[xhpc_i]}}"); done
        xhpc_i=$((xhpc_i + 1))
    done
done
XHPC_NAMES=({names})
XHPC_KEYS=({keys})
XHPC_TASKS=({tasks})
XHPC_CPUS=({cpus})
XHPC_MEM=({memory})
XHPC_FRAMEWORKS=({frameworks})
XHPC_PORTS=({ports})
XHPC_INDEXES=({indexes})
XHPC_VARS=({variables})
xhpc_json="{{"
xhpc_at=0
for xhpc_k in "${{!XHPC_NAMES[@]}}"; do
    xhpc_hosts=("${{xhpc_slots[@]:xhpc_at:XHPC_TASKS[xhpc_k]}}")
    xhpc_at=$((xhpc_at + XHPC_TASKS[xhpc_k]))
    XHPC_ROLE_HOSTS[xhpc_k]="${{xhpc_hosts[*]}}"
    xhpc_list=$(printf '"%s",' "${{xhpc_hosts[@]}}")
    xhpc_json+="${{XHPC_KEYS[xhpc_k]}}:[${{xhpc_list%,}}],"
    export "XCORE_HOST_${{XHPC_VARS[xhpc_k]}}=${{xhpc_hosts[0]}}"
done
export XCORE_JOB_HOSTS="${{xhpc_json%,}}}}"
mkdir -p "$XHPC_RUN/hosts"
# An automatic coordinator port comes from the job id, below the node's ephemeral range (a
# port there may be any outgoing connection's), and steps past the ports this node has in use
# when the role's first host is this node.
xhpc_auto_port() {{  # $1: the role's index; $2: the role's first host. Sets xhpc_port.
    local low=32768 high=60999 from=20000 span=10000 table local_address tries=0
    read -r low high 2>/dev/null < /proc/sys/net/ipv4/ip_local_port_range
    if (( low >= 21024 )); then span=$((low - 20000))
    elif (( high <= 64511 )); then from=$((high + 1)) span=$((65535 - high)); fi
    if [ -z "${{xhpc_used:-}}" ]; then
        xhpc_used=" "
        for table in /proc/net/tcp /proc/net/tcp6; do
            [ -r "$table" ] || continue
            while read -r _ local_address _; do
                [[ $local_address == *:* ]] && xhpc_used+="$((16#${{local_address##*:}})) "
            done < "$table"
        done
    fi
    xhpc_port=$(( from + (SLURM_JOB_ID * 7 + $1 * 211) % span ))
    if [ "$2" = "${{SLURMD_NODENAME:-}}" ]; then
        while [[ $xhpc_used == *" $xhpc_port "* ]] && (( tries < span )); do
            xhpc_port=$(( from + (xhpc_port - from + 1) % span )); tries=$((tries + 1))
        done
    fi
    xhpc_used+="$xhpc_port "
}}
xhpc_pids=()
for xhpc_k in "${{!XHPC_NAMES[@]}}"; do
    xhpc_file="$XHPC_RUN/hosts/${{SLURM_JOB_ID}}-$xhpc_k"
    printf '%s\n' ${{XHPC_ROLE_HOSTS[xhpc_k]}} > "$xhpc_file"
    xhpc_opts=(--ntasks="${{XHPC_TASKS[xhpc_k]}}" --cpus-per-task="${{XHPC_CPUS[xhpc_k]}}")
    [ "${{XHPC_MEM[xhpc_k]}}" != 0 ] && xhpc_opts+=(--mem="${{XHPC_MEM[xhpc_k]}}M")
    xhpc_port=${{XHPC_PORTS[xhpc_k]}}
    [ "$xhpc_port" = auto ] && xhpc_auto_port "$xhpc_k" "${{XHPC_ROLE_HOSTS[xhpc_k]%% *}}"
    xhpc_row=$((XHPC_BASE + XHPC_INDEXES[xhpc_k]))
    SLURM_HOSTFILE="$xhpc_file" XHPC_ROLE_HOSTS="${{XHPC_ROLE_HOSTS[xhpc_k]}}" \
        XHPC_FRAMEWORK="${{XHPC_FRAMEWORKS[xhpc_k]}}" XHPC_PORT="$xhpc_port" \
        srun --distribution=arbitrary --exact --kill-on-bad-exit=1 --job-name="xhpc-role-$xhpc_row" \
        "${{xhpc_opts[@]}}" bash "$XHPC_RUN/role.sh" "$xhpc_row" &
    xhpc_pids+=($!)
done
xhpc_rc=0
for _ in "${{xhpc_pids[@]}}"; do
    wait -n; xhpc_code=$?
    if [ "$xhpc_code" != 0 ] && [ "$xhpc_rc" = 0 ]; then
        xhpc_rc=$xhpc_code
        echo "xhpc: a role exited with $xhpc_code: stopping the others" >&2
        kill -TERM "${{xhpc_pids[@]}}" 2>/dev/null
    fi
done
exit "$xhpc_rc"
"""

# Per task (under srun): the framework's variables from Slurm's own (see xcore.model.distributed
# for the names). Ranks follow the hosts the launcher gave the role, in order.
_DISTRIBUTED = r"""read -ra xhpc_hosts <<< "${XHPC_ROLE_HOSTS:-${SLURMD_NODENAME:-localhost}}"
xhpc_local=0
for xhpc_h in "${xhpc_hosts[@]}"; do [ "$xhpc_h" = "${SLURMD_NODENAME:-}" ] && xhpc_local=$((xhpc_local + 1)); done
XHPC_PORT=${XHPC_PORT:-29500}
export XCORE_RANK=${SLURM_PROCID:-0} XCORE_WORLD_SIZE=${SLURM_NTASKS:-1} XCORE_LOCAL_RANK=${SLURM_LOCALID:-0}
export XCORE_COORDINATOR="${xhpc_hosts[0]}:$XHPC_PORT"
case "${XHPC_FRAMEWORK:-}" in
    torch) export MASTER_ADDR="${xhpc_hosts[0]}" MASTER_PORT="$XHPC_PORT" RANK="$XCORE_RANK" \
               WORLD_SIZE="$XCORE_WORLD_SIZE" LOCAL_RANK="$XCORE_LOCAL_RANK" LOCAL_WORLD_SIZE="$xhpc_local" ;;
    jax) export JAX_COORDINATOR_ADDRESS="$XCORE_COORDINATOR" JAX_NUM_PROCESSES="$XCORE_WORLD_SIZE" \
             JAX_PROCESS_ID="$XCORE_RANK" ;;
    tf) xhpc_w=""
        for xhpc_r in "${!xhpc_hosts[@]}"; do xhpc_w+="\"${xhpc_hosts[xhpc_r]}:$((XHPC_PORT + xhpc_r))\","; done
        xhpc_w="{\"cluster\":{\"worker\":[${xhpc_w%,}]},"
        export TF_CONFIG="$xhpc_w\"task\":{\"type\":\"worker\",\"index\":$XCORE_RANK}}" ;;
esac
unset xhpc_hosts xhpc_local xhpc_h xhpc_w xhpc_r XHPC_PORT XHPC_FRAMEWORK XHPC_ROLE_HOSTS
"""


def launcher_script(executor: Slurm, name: str, run_dir: str, roles: Sequence[Role]) -> str:
    """``job.sh`` of a replicated job or a gang (``role.sh`` runs each task)."""
    from xcore.plugin import role_variable  # the one rule for XCORE_HOST_<ROLE> names

    body = _LAUNCHER.format(
        run_dir=shlex.quote(run_dir),
        names=" ".join(shlex.quote(r.name) for r in roles),
        keys=" ".join(shlex.quote(json.dumps(r.name)) for r in roles),  # JSON strings, whatever the name holds
        tasks=" ".join(str(r.tasks) for r in roles),
        cpus=" ".join(str(r.cpus or 1) for r in roles),
        memory=" ".join(str(r.memory_mb or 0) for r in roles),
        frameworks=" ".join(shlex.quote(r.framework or "none") for r in roles),
        ports=" ".join(str(r.port) if r.port else "auto" for r in roles),
        indexes=" ".join(str(r.index) for r in roles),
        variables=" ".join(role_variable(r.name).removeprefix("XCORE_HOST_") for r in roles),
    )
    header = slurm_directives(executor, name, run_dir, roles)
    return "#!/bin/bash\n" + "\n".join(header) + "\n" + body


_MODULE_INIT = """if ! type module >/dev/null 2>&1; then
    for f in /etc/profile.d/modules.sh /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash /etc/profile; do
        [ -f "$f" ] && . "$f" && type module >/dev/null 2>&1 && break
    done
fi
"""


def role_script(executor: ClusterExecutor, run_dir: str, offsets: Sequence[int],
                plan: retries.Plan | None = None) -> str:
    """``role.sh``: what each task of a replicated job or gang runs (its row is ``$1``)."""
    return job_script(executor, "", run_dir, offsets, plan, step=True)


def job_script(executor: ClusterExecutor, name: str, run_dir: str, offsets: Sequence[int],
               plan: retries.Plan | None = None, step: bool = False) -> str:
    """The array job's script (``step``: a role's, run by ``srun`` inside its gang's allocation);
    ``plan`` (``xhpc.retries``) adds the retry directives, the attempt number and checkpoint
    directory, and the requeue at the time-limit warning (not in a role: its gang's job has it)."""
    if step:
        header, task_expr, scheduler, extra = [], "0", "slurm", []
    elif isinstance(executor, Slurm):
        header = slurm_directives(executor, name, run_dir)
        task_expr = "${SLURM_ARRAY_TASK_ID:-0}"
        scheduler = "slurm"
        extra = [f"#SBATCH {d}" for d in retries.slurm_directives(plan)] if plan is not None else []
    elif isinstance(executor, GridEngine):
        header = sge_directives(executor, name, run_dir)
        task_expr = "$(( ${SGE_TASK_ID:-1} - 1 ))"
        scheduler = "sge"
        extra = [f"#$ {d}" for d in retries.sge_directives(plan, executor.time_limit)] if plan is not None else []
    else:
        raise TypeError(f"not a cluster executor: {executor!r}")
    own = len(header) - len(executor.directives)  # the user's directives come last: they may override ours
    header = header[:own] + extra + header[own:]
    modules = ""
    if executor.modules:
        modules = _MODULE_INIT + "module load " + " ".join(shlex.quote(m) for m in executor.modules) + \
            ' || { echo "xhpc: module load failed" >&2; exit 96; }\n'
    setup = "".join(f"{line}\n" for line in executor.setup)
    attempts = retries.attempt_lines(scheduler, plan) if plan is not None else ""
    run = (retries.run_lines(scheduler, plan) if plan is not None and not step else None) or _EXEC
    body = _BODY.format(run_dir=shlex.quote(run_dir), task_expr=task_expr, offsets=" ".join(map(str, offsets)),
                        modules=modules, setup=(_DISTRIBUTED if step else "") + setup, attempts=attempts, run=run)
    return "#!/bin/bash\n" + "\n".join(header) + "\n" + body


def container_command(runtime: str, image: str, inner: Sequence[str], binds: Mapping[str, str],
                      options: Sequence[str], gpus: bool, extra_binds: Sequence[str] = ()) -> list[str]:
    """``singularity exec [--nv] --bind ... IMAGE cmd...`` (or ``run`` when there is no command)."""
    argv = [runtime, "exec" if inner else "run"]
    if gpus:
        argv.append("--nv")
    for src in extra_binds:
        argv += ["--bind", src]
    for src, dst in binds.items():
        argv += ["--bind", f"{src}:{dst}" if dst else src]
    argv += list(options)
    argv.append(image)
    argv += list(inner)
    return argv


# Fixed text: the container runs as the job's user; GPUs the scheduler gave the job are the
# ones the NVIDIA runtime exposes (as lxm3 does). "$0" is the docker CLI, "$@" the rest.
DOCKER_WRAPPER = ('export NVIDIA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-all}"; '
                  'exec "$0" run --user "$(id -u):$(id -g)" "$@"')


def _mount(source: str, target: str) -> str:
    """A ``--mount`` value; fields with commas or quotes are CSV-quoted, as docker parses them."""
    fields = ["type=bind", f"source={source}", f"target={target}"]
    return ",".join(f'"{f.replace(chr(34), chr(34) * 2)}"' if ("," in f or '"' in f) else f for f in fields)


def docker_command(image: str, inner: Sequence[str], mounts: Sequence[str], volumes: Mapping[str, str],
                   options: Sequence[str], gpus: bool, workdir: str, env_names: Sequence[str],
                   docker: str = "docker") -> list[str]:
    """``docker run --rm ... IMAGE cmd...`` for lxm3's DockerContainer.

    ``mounts`` are bound at the same path (package and working directory), ``volumes`` map
    node paths to container paths. Variables are passed by name (``--env NAME``), so their
    values never appear on a command line; argv reaches the program as data.
    """
    # --init: PID 1 in a container ignores SIGTERM it has no handler for; docker's init passes a
    # cancelled job's signal (forwarded by the docker CLI) to the program, so no container outlives it.
    argv = ["/bin/sh", "-c", DOCKER_WRAPPER, docker, "--rm", "--init"]
    for path in mounts:
        argv += ["--mount", _mount(path, path)]
    for src, dst in volumes.items():
        argv += ["--mount", _mount(src, dst)]
    for name in env_names:
        argv += ["--env", name]
    if gpus:
        argv += ["--runtime=nvidia", "--env", "NVIDIA_VISIBLE_DEVICES"]
    if workdir:
        argv += ["--workdir", workdir]
    argv += list(options)
    argv.append(image)
    argv += list(inner)
    return argv
