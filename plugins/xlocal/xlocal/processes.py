"""Local processes: launch a batch through a detached runner, then read its files for
status, cancel by signalling the job's process tree, and read or follow its log."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from xcore.errors import LaunchError
from xcore.execution import LaunchContext, LaunchRequest
from xcore.status import JobState, Status

from xlocal.executables import LocalProcess
from xlocal.executors import Local
from xlocal.handles import ProcessHandle
from xlocal.runner import process_start_marker, write_json_atomic


def machine_slots() -> int:
    """How many local jobs may run at once on this machine: ``XLOCAL_SLOTS`` or the CPU count."""
    value = os.environ.get("XLOCAL_SLOTS")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise LaunchError(f"XLOCAL_SLOTS={value!r} must be a whole number >= 1.")
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def launch(requests: Sequence[LaunchRequest], context: LaunchContext) -> list[ProcessHandle]:
    runs = context.state_dir / "runs"
    first = requests[0]
    run_dir = runs / f"{first.experiment_id}-{first.job_id}-{secrets.token_hex(3)}"
    (run_dir / "jobs").mkdir(parents=True)
    max_parallel = min((r.executor.max_parallel or 10**9) for r in requests if isinstance(r.executor, Local))
    jobs, handles = [], []
    for index, request in enumerate(requests):
        executable = request.executable
        if not isinstance(executable, LocalProcess):
            raise LaunchError(f"Local processes cannot run a {type(executable).__name__}; package it for xlocal.Local.")
        executor: Local = request.executor  # type: ignore[assignment]
        env = {**(os.environ if executor.inherit_env else {}), **request.env}
        log_path = context.state_dir / "logs" / str(request.experiment_id) / str(request.work_unit_id) / f"{request.job_name}.log"
        jobs.append({
            "argv": [*executable.command, *request.args],
            "env": env,
            "cwd": executor.cwd or executable.cwd or os.getcwd(),
            "log_path": str(log_path),
        })
        handles.append(ProcessHandle(str(run_dir), index, str(log_path)))
    batch = {
        "jobs": jobs,
        "slots": machine_slots(),
        "slots_dir": str(context.state_dir / "slots"),
        "max_parallel": None if max_parallel >= 10**9 else max_parallel,
    }
    write_json_atomic(run_dir / "batch.json", batch, mode=0o600)  # holds env values, secrets included
    runner_log = open(run_dir / "runner.log", "ab")
    try:
        subprocess.Popen(
            [sys.executable, "-m", "xlocal.runner", str(run_dir)],
            stdin=subprocess.DEVNULL, stdout=runner_log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, cwd="/",
            env={**os.environ, "PYTHONPATH": _import_root() + os.pathsep + os.environ.get("PYTHONPATH", "")},
        )
    except OSError as exc:
        raise LaunchError(f"Could not start the local runner ({sys.executable}): {exc}") from exc
    finally:
        runner_log.close()
    context.progress.update(f"started runner for {len(requests)} jobs", detail=str(run_dir))
    return handles


def _import_root() -> str:
    return str(Path(__file__).resolve().parent.parent)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _alive(record: dict[str, Any] | None) -> bool:
    if not record:
        return False
    marker = process_start_marker(int(record["pid"]))
    if marker is None:
        return False
    return record.get("marker") is None or marker == record["marker"]


def states(handles: Sequence[ProcessHandle]) -> list[JobState]:
    runner_alive: dict[str, bool] = {}
    result = []
    for handle in handles:
        jobs = Path(handle.run_dir) / "jobs"
        cancelled = (jobs / f"{handle.index}.cancel").exists()
        started = _read_json(jobs / f"{handle.index}.started")
        ended = _read_json(jobs / f"{handle.index}.exit")
        start_time = started["started_at"] if started else None
        if ended is not None:
            result.append(_final_state(ended, cancelled, start_time))
            continue
        if handle.run_dir not in runner_alive:
            runner_alive[handle.run_dir] = _alive(_read_json(Path(handle.run_dir) / "runner.json"))
        if started is not None:
            if _alive(started):
                result.append(JobState(Status.RUNNING, f"pid {started['pid']}", started_at=start_time))
            elif runner_alive[handle.run_dir]:
                result.append(JobState(Status.RUNNING, "finishing", started_at=start_time))
            else:
                result.append(JobState(Status.CANCELLED if cancelled else Status.FAILED,
                                       "exit status lost: the xlocal runner was killed", started_at=start_time))
        elif runner_alive[handle.run_dir] or _runner_starting(handle):
            result.append(JobState(Status.CANCELLED if cancelled else Status.PENDING,
                                   "cancelled" if cancelled else "waiting for a free slot"))
        else:
            result.append(JobState(Status.CANCELLED if cancelled else Status.FAILED,
                                   "the xlocal runner exited before starting the job"))
    return result


def _runner_starting(handle: ProcessHandle) -> bool:
    """A runner that has not written runner.json yet gets a few seconds to start."""
    run_dir = Path(handle.run_dir)
    return not (run_dir / "runner.json").exists() and time.time() - (run_dir / "batch.json").stat().st_mtime < 30


def _final_state(ended: dict[str, Any], cancelled: bool, started_at: float | None) -> JobState:
    code, when, error = ended.get("returncode"), ended.get("ended_at"), ended.get("error")
    if cancelled and code != 0:
        return JobState(Status.CANCELLED, "cancelled", None if code is None or code < 0 else code, started_at, when)
    if code == 0:
        return JobState(Status.COMPLETED, "exit code 0", 0, started_at, when)
    if error:
        return JobState(Status.FAILED, error, code, started_at, when)
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        return JobState(Status.FAILED, f"killed by signal {name}", 128 - code, started_at, when)
    return JobState(Status.FAILED, f"exit code {code}", code, started_at, when)


def _descendants(root: int) -> list[int]:
    """Every process below ``root``, found through /proc parent links (also those that left its session)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                ppid = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _signal_tree(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def cancel(handles: Sequence[ProcessHandle], grace: float = 5.0) -> None:
    """Mark jobs cancelled, then TERM each running job's whole tree and KILL what outlives ``grace``."""
    targets: list[int] = []
    for handle in handles:
        jobs = Path(handle.run_dir) / "jobs"
        (jobs / f"{handle.index}.cancel").touch()
        started = _read_json(jobs / f"{handle.index}.started")
        if started and _alive(started) and not (jobs / f"{handle.index}.exit").exists():
            targets.append(int(started["pid"]))
    if not targets:
        return
    tree = sorted({p for pid in targets for p in [pid, *_descendants(pid)]})
    _signal_tree(tree, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not any(process_start_marker(p) for p in tree):
            return
        time.sleep(0.05)
    tree = sorted({p for p in tree if process_start_marker(p)} | {d for p in targets for d in _descendants(p)})
    _signal_tree(tree, signal.SIGKILL)


def logs(handle: ProcessHandle, follow: bool) -> Iterator[str]:
    path = Path(handle.log_path)
    exit_file = Path(handle.run_dir) / "jobs" / f"{handle.index}.exit"
    waited = 0.0
    while not path.exists():
        if not follow or exit_file.exists():
            if exit_file.exists():
                return
            yield ""
            return
        time.sleep(0.1)
        waited += 0.1
    with open(path, "rb") as log:
        decoder = _Utf8Stream()
        while True:
            chunk = log.read(65536)
            if chunk:
                yield decoder.feed(chunk)
                continue
            if not follow or exit_file.exists():
                rest = log.read()
                tail = decoder.feed(rest) + decoder.flush()
                if tail:
                    yield tail
                return
            time.sleep(0.1)


class _Utf8Stream:
    """Decodes UTF-8 across chunk boundaries."""

    def __init__(self) -> None:
        import codecs

        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)
