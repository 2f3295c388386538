"""``ShellCommand``: how to open a shell (or run one command) inside a running job.

A backend answers ``shell(handle, command)`` with the program ``xcore shell`` replaces itself
with (``os.execvpe``), so the user's terminal is attached to it directly: ``ssh -t ... srun
--jobid N --overlap --pty ...`` for Slurm, ``docker exec -it ...`` for a container, the
job's own environment and directory for a local process. Arguments stay a list from the
user's command line to the program; a backend that must cross a remote shell quotes each one
(``shlex.quote``), so nothing the user typed becomes a shell line unless they ask for one
(``-- bash -c '...'``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs


def _argv(value: Iterable[str]) -> tuple[str, ...]:
    argv = tuple(value)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"ShellCommand.argv must be a non-empty list of strings, got {value!r}.")
    return argv


@attrs.frozen
class ShellCommand:
    """``argv``: the program and its arguments (``argv[0]`` looked up on PATH); ``cwd``: where
    it starts (None: here); ``env``: its whole environment (None: xcore's own)."""

    argv: tuple[str, ...] = attrs.field(converter=_argv)
    cwd: str | None = None
    env: Mapping[str, str] | None = None


def default_shell_command(environ: Mapping[str, str]) -> list[str]:
    """The interactive shell to start when the user names no command: their ``$SHELL``, else sh."""
    shell = environ.get("SHELL") or "/bin/sh"
    return [shell, "-i"] if shell.endswith("sh") else [shell]
