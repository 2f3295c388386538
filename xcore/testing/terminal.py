"""Driving an interactive command through a pseudo-terminal, as a user at a terminal would
(the tests of ``xcore shell`` type into the shell it opens and read what it prints)."""

from __future__ import annotations

import os
import pty
import select
import time


def converse(argv: list[str], typed: str, *, env: dict[str, str] | None = None, timeout: float = 60.0,
             settle: str = "") -> tuple[str, int]:
    """Run ``argv`` on a new terminal, type ``typed`` once it printed something (its prompt) or
    ``settle`` when given, and read until it exits: (everything it printed, its exit status)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is its stdin/stdout/stderr
        try:
            os.execvpe(argv[0], argv, env if env is not None else os.environ)
        finally:
            os._exit(127)
    output = b""
    sent = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sent and output and (not settle or settle.encode() in output):
                os.write(fd, typed.encode())
                sent = True
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the other side closed, the program ended
                break
            if not chunk:
                break
            output += chunk
        else:
            os.kill(pid, 9)
            printed = output.decode(errors="replace")
            raise AssertionError(f"{argv} did not end within {timeout} s; it printed: {printed}")
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return output.decode(errors="replace"), os.waitstatus_to_exitcode(status)
