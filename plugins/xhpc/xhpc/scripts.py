"""Job scripts and task files: how one array job runs many work units with their own args.

Everything a user controls per task (argv, environment, the command itself) goes into
``tasks.bin`` as NUL-separated data; the job script reads its task's record with
``mapfile -d ''`` and runs ``exec "${cmd[@]}" "${args[@]}"``. Nothing is pasted into shell
text or passed through ``eval``, so quotes, ``$``, backticks, backslashes, newlines and
empty strings reach the program byte for byte. Only scheduler directives, module names and
the executor's ``setup`` commands (shell by design) are script text.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
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
    for task in tasks:
        args = task.args
        record = [str(len(args)), *args]
        if task.env:
            record += [f"{k}={v}" for k, v in task.env.items() if common_env.get(k) != v]
        texts.append("\0".join(record) + "\0")
        fields += len(record)
    text = "".join(texts)
    if text.count("\0") != fields:
        raise _nul_error([*head, *(f for t in tasks for f in (*t.args, *(f"{k}={v}" for k, v in t.env.items())))])
    offsets = [0]
    total = 0
    if text.isascii():
        data = text.encode("ascii")
        for record_text in texts:
            total += len(record_text)
            offsets.append(total)
        return data, offsets
    encoded = [record_text.encode("utf-8", "surrogateescape") for record_text in texts]
    for chunk in encoded:
        total += len(chunk)
        offsets.append(total)
    return b"".join(encoded), offsets


def common_env(tasks: Sequence[TaskLike]) -> dict[str, str]:
    """The variables every task sets to the same value."""
    if not tasks:
        return {}
    first = tasks[0].env
    if not first:
        return {}
    return {k: v for k, v in first.items() if all(t.env.get(k) == v for t in tasks[1:])}


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


def slurm_directives(executor: Slurm, name: str, run_dir: str) -> list[str]:
    d = [f"--job-name={job_name(name)}", f"--output={run_dir}/logs/slurm-%A_%a.out", "--open-mode=append",
         "--ntasks=1"]
    req = executor.requirements
    if req.cpu:
        d.append(f"--cpus-per-task={math.ceil(req.cpu)}")
    if req.memory:
        d.append(f"--mem={math.ceil(req.memory / 2**20)}M")
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


_MODULE_INIT = """if ! type module >/dev/null 2>&1; then
    for f in /etc/profile.d/modules.sh /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash /etc/profile; do
        [ -f "$f" ] && . "$f" && type module >/dev/null 2>&1 && break
    done
fi
"""


def job_script(executor: ClusterExecutor, name: str, run_dir: str, offsets: Sequence[int],
               plan: retries.Plan | None = None) -> str:
    """The array job's script; ``plan`` (``xhpc.retries``) adds the retry directives, the attempt
    number and checkpoint directory, and the requeue at the time-limit warning."""
    if isinstance(executor, Slurm):
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
    run = (retries.run_lines(scheduler, plan) if plan is not None else None) or _EXEC
    body = _BODY.format(run_dir=shlex.quote(run_dir), task_expr=task_expr, offsets=" ".join(map(str, offsets)),
                        modules=modules, setup=setup, attempts=attempts, run=run)
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
