"""``xcore shell`` for cluster jobs: a step inside the running job's allocation.

Slurm: ``srun --jobid=<the task's own job id> --overlap [--pty]`` on the login node (over the
cluster's SSH connection, ``ssh -t`` when the user has a terminal). The step first loads the
task's own environment and working directory from ``tasks.bin`` as the job script does (NUL
records read with ``mapfile``, never evaluated), then runs the user's command, each word
quoted for the remote shell (``shlex.join``), or their login shell. The executor's ``modules``
and ``setup`` lines are not run again. Grid Engine has no portable way in: ``qrsh -inherit``
works only inside a parallel environment's own tasks, so the user is told what to do instead.
"""

from __future__ import annotations

import shlex
import sys

from xcore.plugin import ShellCommand, XcoreError
from xhpc.handles import ClusterHandle, GridEngineHandle

# Run by bash on the compute node as: bash -c ENTER xhpc-shell RUN_DIR INDEX [CMD...]
ENTER = r"""
XHPC_RUN=$1; XHPC_INDEX=$2; shift 2
read -r -a XHPC_OFFSETS <<< "$(sed -n 's/^XHPC_OFFSETS=(\(.*\))$/\1/p' "$XHPC_RUN/job.sh")"
xhpc_record() {
    local start=${XHPC_OFFSETS[$1]} end=${XHPC_OFFSETS[$1+1]}
    mapfile -d '' -t XHPC_REC < <(tail -c +$((start + 1)) "$XHPC_RUN/tasks.bin" | head -c $((end - start)))
}
if [ -n "${XHPC_OFFSETS[$XHPC_INDEX + 2]:-}" ]; then
    xhpc_record 0
    XHPC_CWD=${XHPC_REC[0]}
    XHPC_N=${XHPC_REC[1]}
    for XHPC_KV in "${XHPC_REC[@]:2+XHPC_N}"; do export -- "$XHPC_KV"; done
    xhpc_record $((XHPC_INDEX + 1))
    XHPC_N=${XHPC_REC[0]}
    for XHPC_KV in "${XHPC_REC[@]:1+XHPC_N}"; do export -- "$XHPC_KV"; done
    cd -- "$XHPC_CWD" 2>/dev/null || echo "xhpc: cannot enter $XHPC_CWD" >&2
else
    echo "xhpc: task $XHPC_INDEX is not in $XHPC_RUN/tasks.bin: its environment is not loaded" >&2
fi
unset XHPC_REC XHPC_N XHPC_KV XHPC_OFFSETS XHPC_CWD
export XHPC_INDEX XHPC_RUN
[ $# -gt 0 ] && exec "$@"
exec "${SHELL:-/bin/bash}" -i
"""


def shell(handle: ClusterHandle, command: list[str] | None) -> ShellCommand:
    if isinstance(handle, GridEngineHandle):
        raise XcoreError(
            f"Grid Engine has no portable way into a running job (qrsh -inherit works only inside a parallel "
            f"environment's own tasks). On the cluster, `qstat -j {handle.job_id}` names the task's host: "
            "ssh there, or run your command from the job script.")
    from xhpc.tracking import _transport
    from xhpc.transport import LocalTransport, SSHTransport

    if not handle.job_id:
        raise XcoreError("The job's Slurm id was never confirmed (the submission reply was lost): no way in.")
    transport = _transport(handle)
    found = transport.check(f"squeue -h -j {shlex.quote(handle.task_id)} -o %A", "Finding the job's allocation")
    real = (found.out.split() or [""])[0]
    if not real.isdigit():
        raise XcoreError(f"Slurm no longer lists job {handle.task_id}: it has ended.")
    tty = sys.stdin.isatty()
    step = ["srun", f"--jobid={real}", "--overlap", "--quiet", *(["--pty"] if tty else []),
            "/bin/bash", "-c", ENTER, "xhpc-shell", handle.run_dir, str(handle.index), *(command or [])]
    if isinstance(transport, LocalTransport):
        return ShellCommand(step)
    if not isinstance(transport, SSHTransport):
        raise XcoreError("xcore shell needs the OpenSSH client (ssh on PATH) to reach the cluster; the paramiko "
                         "fallback cannot attach a terminal.")
    argv = transport.argv(shlex.join(step))
    if tty:  # a terminal on the far side too, for the shell's line editing and job control
        argv[argv.index("-T")] = "-t"
    return ShellCommand(argv)
