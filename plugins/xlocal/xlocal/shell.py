"""``xcore shell`` for local jobs: a process job's own environment and working directory (read
from its runner batch, 0600), or ``docker exec`` into a container job."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from xcore.plugin import ShellCommand, XcoreError
from xlocal.handles import ContainerHandle, ProcessHandle


def process_shell(handle: ProcessHandle, command: list[str] | None) -> ShellCommand:
    """The job's argv-free setting (env, cwd) with ``command`` or the user's shell in it."""
    from xlocal.processes import _read_json

    batch = _read_json(Path(handle.run_dir) / "batch.json")
    jobs = (batch or {}).get("jobs") or []
    if batch is None or handle.index >= len(jobs):
        raise XcoreError(f"The local job's batch file in {handle.run_dir} is gone: cannot rebuild its environment.")
    job = jobs[handle.index]
    env = dict(job.get("env") or {})
    if job.get("inherit_env", True):
        env = {**(batch.get("base_env") or {}), **env}
    cwd = job.get("cwd") or batch.get("cwd")
    return ShellCommand(command or _interactive((env or os.environ).get("SHELL")), cwd=cwd, env=env)


def container_shell(handle: ContainerHandle, command: list[str] | None) -> ShellCommand:
    """``docker exec -i[t] CONTAINER CMD`` on the job's engine (``podman`` when there is no
    docker client); ``sh`` when no command is given (images may lack bash)."""
    target = handle.container_id or handle.name
    tty = ["-it"] if sys.stdin.isatty() else ["-i"]
    if shutil.which("docker"):
        return ShellCommand(["docker", "-H", handle.base_url, "exec", *tty, target, *(command or ["sh"])])
    if shutil.which("podman"):
        return ShellCommand(["podman", "--url", handle.base_url, "exec", *tty, target, *(command or ["sh"])])
    raise XcoreError(f"Neither docker nor podman is on PATH: install one, or run `exec` on container {target} "
                     f"through the engine at {handle.base_url} yourself.")


def _interactive(shell: str | None) -> list[str]:
    """The user's shell, interactive (sh when ``$SHELL`` is unset)."""
    shell = shell or "/bin/sh"
    return [shell, "-i"] if shell.endswith("sh") else [shell]
