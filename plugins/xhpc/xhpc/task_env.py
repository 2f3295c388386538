"""A task's real environment, read back from its run's private task file (``env`` hook).

The store keeps secrets redacted; ``xcore retry`` needs the values the job ran with. They are in
``tasks.bin`` (0600, in the run directory on the cluster): record 0 holds the variables every
task shares, the task's own record the rest. One remote command reads just those two records
(the offsets are in ``job.sh``), base64-encoded so NUL separators survive any transport.
"""

from __future__ import annotations

import base64
import json
import shlex

from xcore.plugin import ATTEMPT_VAR, CHECKPOINT_VAR
from xhpc.handles import ClusterHandle, GridEngineHandle

_XCORE_SET = {ATTEMPT_VAR, CHECKPOINT_VAR}  # xcore sets these for each attempt: not the job's own


def _command(handle: ClusterHandle) -> str:
    i = int(handle.index)
    return (
        f"cd {shlex.quote(handle.run_dir)} 2>/dev/null && [ -r tasks.bin ] || exit 0\n"
        "o=($(sed -n 's/^XHPC_OFFSETS=(\\(.*\\))$/\\1/p' job.sh))\n"
        f"[ -n \"${{o[{i + 2}]:-}}\" ] || exit 0\n"
        "head -c \"${o[1]}\" tasks.bin | base64 -w0; echo\n"
        f"tail -c +$((o[{i + 1}] + 1)) tasks.bin | head -c $((o[{i + 2}] - o[{i + 1}])) | base64 -w0; echo\n"
        "base64 -w0 xcore-jobs.json 2>/dev/null; echo\n"
    )


def _fields(encoded: str) -> list[str]:
    data = base64.b64decode(encoded).decode("utf-8", "surrogateescape")
    return data.split("\0")[:-1] if data.endswith("\0") else data.split("\0")


def parse(out: str) -> dict[str, str] | None:
    """The job's own variables from the command's output; None when the task file is gone."""
    lines = out.split("\n")
    if len(lines) < 2 or not lines[0] or not lines[1]:
        return None
    head, task = _fields(lines[0]), _fields(lines[1])
    try:
        backend = set(json.loads(base64.b64decode(lines[2]))["backend_env"]) if len(lines) > 2 and lines[2] else set()
    except (ValueError, KeyError, TypeError):
        backend = set()
    if len(head) < 2 or not head[1].isdigit() or not task or not task[0].isdigit():
        return None
    env: dict[str, str] = {}
    for item in head[2 + int(head[1]):] + task[1 + int(task[0]):]:
        name, sep, value = item.partition("=")
        if sep:
            env[name] = value
    return {k: v for k, v in env.items() if k not in _XCORE_SET and k not in backend}


def env(handle: ClusterHandle) -> dict[str, str] | None:
    from xhpc import config
    from xhpc.transport import connect

    if handle.error or not handle.run_dir:
        return None
    scheduler = "sge" if isinstance(handle, GridEngineHandle) else "slurm"
    transport = connect(config.find(handle.cluster, scheduler, handle.local))
    return parse(transport.run(_command(handle)).out)
