"""``Local(experimental_stream_output=True)``: copy a process job's output to the launcher's
terminal while the launcher runs, each line prefixed with the job's name.

Jobs stay detached and keep their log files; this is a follower, so a launcher that exits
early just stops copying (``xcore logs -f`` resumes). One daemon thread per launch batch.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

from xlocal.handles import ProcessHandle

POLL_SECS = 0.2


def follow(jobs: Sequence[tuple[str, ProcessHandle]], out: IO[str] | None = None) -> threading.Thread:
    thread = threading.Thread(target=_copy, args=(list(jobs), out), name="xlocal-stream-output", daemon=True)
    thread.start()
    return thread


def _copy(jobs: list[tuple[str, ProcessHandle]], out: IO[str] | None) -> None:
    from xlocal.processes import states

    offsets = {handle.log_path: 0 for _, handle in jobs}
    partial = {handle.log_path: "" for _, handle in jobs}
    pending = list(jobs)
    while pending:
        ended = {id(h) for (_, h), state in zip(pending, states([h for _, h in pending]), strict=True)
                 if not state.status.is_active}
        for name, handle in list(pending):
            _drain(name, handle.log_path, offsets, partial, out or sys.stdout)
            if id(handle) in ended:
                if partial[handle.log_path]:
                    (out or sys.stdout).write(f"[{name}] {partial[handle.log_path]}\n")
                (out or sys.stdout).flush()
                pending.remove((name, handle))
        time.sleep(POLL_SECS)


def _drain(name: str, path: str | None, offsets: dict[str | None, int], partial: dict[str | None, str],
           out: IO[str]) -> None:
    if path is None:  # no log file: nothing to copy
        return
    try:
        with open(path, "rb") as log:
            log.seek(offsets[path])
            data = log.read()
    except FileNotFoundError:
        return
    if not data:
        return
    offsets[path] += len(data)
    text = partial[path] + data.decode("utf-8", errors="replace")
    *lines, partial[path] = text.split("\n")
    for line in lines:
        out.write(f"[{name}] {line}\n")
    out.flush()
