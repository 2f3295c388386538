"""Local processes: launch a batch through a detached runner, then read its files for
status, cancel by signalling the job's process tree, and read or follow its log."""

from __future__ import annotations

import _socket
import array
import errno
import fcntl
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from xcore.plugin import (
    Attempt,
    JobState,
    LaunchContext,
    LaunchError,
    LaunchRequest,
    Status,
    describe_exit,
    exit_state,
    follow_file,
    lost_state,
    mark_cancelled,
    private_dir,
    role_env,
)
from xlocal import gpus
from xlocal.executables import LocalContainer, LocalProcess
from xlocal.executors import Local
from xlocal.handles import ProcessHandle
from xlocal.runner import process_start_time, write_json_atomic


def machine_slots() -> int:
    """How many local jobs may run at once on this machine: ``XLOCAL_SLOTS`` or the CPU count."""
    value = os.environ.get("XLOCAL_SLOTS")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise LaunchError(f"XLOCAL_SLOTS={value!r} must be a whole number >= 1.")
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


_UNSAFE_IN_FILE_NAME = re.compile(r"[^a-zA-Z0-9_.-]+")


def log_file_name(request: LaunchRequest) -> str:
    """``WU-NAME.log`` inside the experiment's log directory, whatever the job's name: ``/`` and
    other characters a file name should not hold become ``-`` (as Docker, Slurm and SGE do
    with names), so ``../../etc`` cannot leave the directory; such a name gets the job's id
    too, so two names that read alike once cleaned never share a log."""
    name = _UNSAFE_IN_FILE_NAME.sub("-", request.job_name).strip("-.")[:100] or "job"
    suffix = "" if name == request.job_name else f"-{request.job_id}"
    return f"{request.work_unit_id}-{name}{suffix}.log"


def launch(requests: Sequence[LaunchRequest], context: LaunchContext) -> list[ProcessHandle]:
    runs = private_dir(context.state_dir / "runs")
    first = requests[0]
    run_dir = runs / f"{first.experiment_id}-{first.job_id}-{os.urandom(3).hex()}"
    private_dir(run_dir / "jobs")
    max_parallel = min((r.executor.max_parallel or 10**9) for r in requests if isinstance(r.executor, Local))
    log_dir = str(private_dir(context.state_dir / "logs" / str(first.experiment_id)))
    run_dir_text, here = str(run_dir), os.getcwd()
    slots_dir = str(private_dir(context.state_dir / "slots"))
    checkpoints = str(context.state_dir / "checkpoints")  # xcore.plugin.checkpoint_dir's root: the runner makes them
    devices = _GpuPlan(gpus.inventory())
    base_env = dict(os.environ)
    hidden_in_base = devices.hide_in_base_env(requests)
    if hidden_in_base:
        base_env[devices.found.env] = devices.hidden_value
    jobs: list[dict[str, Any]] = []
    handles: list[ProcessHandle] = []
    groups = _group_hosts(requests)
    for index, request in enumerate(requests):
        executable = request.executable
        executor: Local = request.executor  # type: ignore[assignment]
        log_path = os.path.join(log_dir, log_file_name(request))
        if isinstance(executable, LocalProcess):
            argv, env, inherit, cwd = [*executable.command, *request.args], request.env, executor.inherit_env, (
                executor.cwd or executable.cwd or here)
            replicas = executor.requirements.replicas
            if replicas > 1 or executor.distributed is not None:
                from xlocal import replicas as replicated

                argv = replicated.wrap(argv, replicas, executor.distributed)
            roles = groups.get((request.experiment_id, request.work_unit_id))
            if roles:
                env = {**role_env(roles), **env}
        elif isinstance(executable, LocalContainer) and _containers().asks_for_gpus(request):
            argv, env, inherit, cwd = _containers().gpu_job(request, context), {}, True, here
        else:
            raise LaunchError(f"Local processes cannot run a {type(executable).__name__}; package it for xlocal.Local.")
        job = {
            "argv": argv,
            "env": env,
            "inherit_env": inherit,
            "cwd": cwd,
            "log_path": log_path,
            "job_id": request.job_id,  # lets a later process adopt the job if the launcher dies (adopt)
            "checkpoint": f"{checkpoints}/{request.experiment_id}/{request.work_unit_id}",
        }
        if request.depends_on:
            job["after"] = _after(request, run_dir_text, requests)
        if request.attempt != 1:
            job["attempt"] = request.attempt
        devices.plan(job, request, executor, hidden_in_base)
        if "gpu" not in job and (local := _local_retry(request)) is not None:
            job["retry"] = local
        jobs.append(job)
        handles.append(ProcessHandle(run_dir_text, index, executor.kill_grace_secs, log_path=log_path))
    cwds = {job["cwd"] for job in jobs}
    batch = {
        "cwd": cwds.pop() if len(cwds) == 1 else None,  # the runner works there, so jobs start without chdir
        "base_env": base_env,
        "jobs": jobs,
        "slots": machine_slots(),
        "slots_dir": slots_dir,
        "max_parallel": None if max_parallel >= 10**9 else max_parallel,
    }
    if devices.sets:
        batch["gpus"] = {"dir": slots_dir, "env": devices.found.env, "sets": devices.sets}
    # 0600: holds env values, secrets included. Renamed into place, not fsynced: the runner reads
    # it at once, and after a crash of the machine its jobs are gone anyway.
    write_json_atomic(str(run_dir / "batch.json"), batch)
    # The runner's liveness is this lock, taken before it exists and handed to it: no status
    # query can ever see a live runner as dead, however slowly it starts.
    lock_fd = os.open(run_dir / "runner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    # Its write end, held with the lock until every job of the batch ended, tells waiters that moment.
    os.mkfifo(run_dir / DONE_FIFO, 0o600)
    done_fd = os.open(run_dir / DONE_FIFO, os.O_RDWR)  # RDWR: opening a FIFO write-only blocks without a reader
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if not _hand_over(run_dir, (lock_fd, done_fd)):
            _start_runner(run_dir, lock_fd, done_fd)
    except OSError as exc:
        raise LaunchError(f"Could not start the local runner ({sys.executable}): {exc}") from exc
    finally:
        os.close(lock_fd)  # the runner's copy keeps the lock
        os.close(done_fd)
    jobs_text = "1 job" if len(requests) == 1 else f"{len(requests)} jobs"
    context.progress.update(f"started runner for {jobs_text}", detail=str(run_dir))
    return handles


def _after(request: LaunchRequest, run_dir: str, requests: Sequence[LaunchRequest]) -> list[list[Any]]:
    """The runner's ``after`` list of a job (see ``xlocal.runner._after``): each dependency as
    ``[run_dir, index, when, name]``, in this batch (found by job id) or in an earlier one."""
    index_of = {r.job_id: i for i, r in enumerate(requests)}
    after = []
    for dep in request.depends_on:
        if dep.handle is None:
            after.append([run_dir, index_of[dep.job_id], dep.when, dep.name])
        elif isinstance(dep.handle, ProcessHandle):
            after.append([dep.handle.run_dir, dep.handle.index, dep.when, dep.name])
        else:
            raise LaunchError(f"{request.full_name} depends on {dep.name}, a container job: xlocal's runner waits "
                              "only for process jobs; run the dependency as a process (xlocal.Local.Spec()).")
    return after


def _group_hosts(requests: Sequence[LaunchRequest]) -> dict[tuple[int, int], dict[str, list[str]]]:
    """Per work unit of several jobs (a JobGroup): role -> its hosts (127.0.0.1, once per replica)."""
    units: dict[tuple[int, int], dict[str, list[str]]] = {}
    for request in requests:
        replicas = request.executor.requirements.replicas if isinstance(request.executor, Local) else 1
        units.setdefault((request.experiment_id, request.work_unit_id), {})[request.job_name] = ["127.0.0.1"] * replicas
    return {unit: roles for unit, roles in units.items() if len(roles) > 1}


_RUNNER_CLASSES = ("error", "out_of_memory")  # what a local process can fail with, so its runner can retry


def _local_retry(request: LaunchRequest) -> dict[str, Any] | None:
    """The part of the job's policy the runner applies (``retry`` in its spec), or None when
    the policy retries nothing a local process can fail with (the default: preemption and node
    failure only): then the runner records the first failure, as it always did."""
    policy = request.retry
    if policy is None or policy.max_attempts <= request.attempt:
        return None
    on = [c for c in policy.on if c in _RUNNER_CLASSES]
    if not on and not policy.exit_codes:
        return None
    return {"max": policy.max_attempts, "on": on, "codes": list(policy.exit_codes), "backoff": policy.backoff_secs}


def _containers() -> Any:
    from xlocal import containers  # the Docker SDK's code: only for a GPU container

    return containers


class _GpuPlan:
    """Which devices each job of a batch may get (see xlocal.gpus and xlocal.runner), and
    hiding the machine's GPUs from jobs that ask for none."""

    def __init__(self, found: gpus.Inventory) -> None:
        self.found = found
        self.hidden_value = "" if found.env == gpus.NVIDIA_ENV else "-1"  # HIP: an invalid index ends the list
        self.sets: list[list[list[str]]] = []  # device sets: [[key, id], ...]
        self._set_index: dict[tuple[str, ...], int] = {}
        self._asks: dict[int, tuple[int, Any]] = {}  # id(requirements) -> (count, type): a sweep shares them

    def _asked(self, executor: Local) -> tuple[int, Any]:
        key = id(executor.requirements)
        if key not in self._asks:
            self._asks[key] = gpus.requested(executor.requirements)
        return self._asks[key]

    def hide_in_base_env(self, requests: Sequence[LaunchRequest]) -> bool:
        """Hide the GPUs in the environment all jobs share? Yes when the machine has some and
        no job without a GPU request opted out (``hide_gpus=False``)."""
        if not self.found.gpus:
            return False
        return all(getattr(r.executor, "hide_gpus", True) or self._asked(r.executor)[0]  # type: ignore[arg-type]
                   for r in requests)

    def plan(self, job: dict[str, Any], request: LaunchRequest, executor: Local, hidden_in_base: bool) -> None:
        count, gpu_type = self._asked(executor)
        if count:
            label = f"Job {request.work_unit_id}/{request.job_name}"
            fitting = tuple(g.key for g in gpus.eligible(self.found, count, gpu_type, label))
            if fitting not in self._set_index:
                by_key = {g.key: g for g in self.found.gpus}
                self._set_index[fitting] = len(self.sets)
                self.sets.append([[key, by_key[key].id] for key in fitting])
            job["gpu"] = [count, self._set_index[fitting], executor.gpu_share]
        elif self.found.gpus and executor.hide_gpus and not (hidden_in_base and executor.inherit_env):
            job["env"] = {self.found.env: self.hidden_value, **job["env"]}  # the job's own value wins


def _start_runner(run_dir: Path, lock_fd: int, done_fd: int) -> None:
    """A runner of its own for one batch: when this process has no serving runner to hand it to."""
    runner_log = os.open(run_dir / "runner.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        subprocess.Popen(
            runner_command(str(run_dir), str(lock_fd), str(done_fd)),
            stdin=subprocess.DEVNULL, stdout=runner_log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, pass_fds=(lock_fd, done_fd), cwd="/",
        )
    finally:
        os.close(runner_log)


# A launcher's batches go to one runner it started ahead of time (when it packaged a local
# process): that runner's start-up overlaps the adds, and batches handed over while earlier
# ones run share its slots instead of starting a runner each. It gets each batch's directory
# and descriptors (lock, FIFO) over a socket and acknowledges them; no acknowledgement (it
# exited, or went idle) means nothing of the batch started, and another runner takes it.
_server_lock = threading.Lock()
_server: tuple[int, Any, Any] | None = None  # (pid of this process, socket, Popen)


def _runner_per_batch() -> bool:
    """``XLOCAL_RUNNER_PER_BATCH=1``: each batch gets a runner of its own (no serving runner)."""
    return os.environ.get("XLOCAL_RUNNER_PER_BATCH", "") not in ("", "0")


def start_server() -> None:
    """Start this process's serving runner now, if it has none (see ``_hand_over``)."""
    if _runner_per_batch():
        return
    with _server_lock:
        _ensure_server()


def _ensure_server() -> Any:
    global _server
    if _server is not None and _server[0] == os.getpid():
        return _server[1]
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)  # (socket's enums: ~4 ms)
    try:
        proc = subprocess.Popen(
            runner_command("--serve", str(theirs.fileno())),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, pass_fds=(theirs.fileno(),), cwd="/",
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    _server = (os.getpid(), ours, proc)
    return ours


def _drop_server() -> None:
    global _server
    if _server is not None:
        if _server[0] == os.getpid():
            _server[1].close()  # a runner still serving finishes what it has, then exits
        _server = None


def _hand_over(run_dir: Path, fds: tuple[int, int]) -> bool:
    """Give the batch in ``run_dir`` to this process's serving runner (started if need be);
    False if none took it."""
    if _runner_per_batch():
        return False
    with _server_lock:
        for _attempt in range(2):
            channel = _ensure_server()
            try:
                descriptors = (_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))  # socket.send_fds
                channel.sendmsg([os.fsencode(run_dir)], [descriptors])
                if channel.recv(1) == b"1":
                    return True
            except OSError:
                pass
            _drop_server()  # it is gone: the next attempt starts another
    return False


def adopt(requests: Sequence[LaunchRequest], context: LaunchContext) -> list[ProcessHandle | None]:
    """Handles for the requests a dead launcher handed to a runner, found by job id in the run
    directories of their experiments. A batch whose runner never started (the launcher died
    between writing it and starting the runner) is withdrawn, so its jobs count as not launched."""
    wanted = {r.job_id: r for r in requests}
    found: dict[int, ProcessHandle] = {}
    runs = context.state_dir / "runs"
    for experiment_id in sorted({r.experiment_id for r in requests}):
        for run_dir in sorted(runs.glob(f"{experiment_id}-*")):
            batch = _read_json(run_dir / "batch.json")
            ids = [job.get("job_id") for job in (batch or {}).get("jobs", [])]
            if not wanted.keys() & set(ids) or not _runner_started(run_dir):
                continue
            for index, (job_id, job) in enumerate(zip(ids, batch["jobs"] if batch else [], strict=True)):
                request = wanted.get(job_id) if isinstance(job_id, int) else None
                if request is not None and job.get("attempt", 1) == request.attempt:  # that attempt's run
                    grace = getattr(request.executor, "kill_grace_secs", 5.0)
                    found[request.job_id] = ProcessHandle(str(run_dir), index, grace, log_path=job["log_path"])
    return [found.get(r.job_id) for r in requests]


def _runner_started(run_dir: Path, wait_secs: float = 5.0) -> bool:
    """Did a runner take this batch? Give one just started a few seconds to say so; then
    withdraw the batch so no runner can start it any more."""
    deadline = (run_dir / "batch.json").stat().st_mtime + wait_secs
    while not (run_dir / "runner.json").exists() and time.time() < deadline:
        time.sleep(0.05)
    if (run_dir / "runner.json").exists():
        return True
    os.replace(run_dir / "batch.json", run_dir / "batch.json.withdrawn")
    time.sleep(0.5)  # a runner that read the batch just before the rename says so now
    if (run_dir / "runner.json").exists():
        os.replace(run_dir / "batch.json.withdrawn", run_dir / "batch.json")
        return True
    return False


DONE_FIFO = "done.fifo"
MAX_WATCHED_RUNS = 256  # each watched run costs a descriptor during the wait


def wait_for_change(handles: Sequence[ProcessHandle], timeout: float) -> None:
    """Block until the runner has let go of every run of these jobs (all their jobs ended), or
    ``timeout`` s pass: no polling. A run's ``done.fifo`` has its write end held, with the
    run's lock, from before the runner starts until the last job of the run ended (or the
    runner died), so the read end reports a hang-up at that moment, to any number of waiters
    in any process. Only the last run's end wakes the wait: an earlier one would cost a poll
    of every active job, CPU the jobs need (the core polls every few seconds for progress).
    A run already let go of (or launched before the FIFO existed) can never signal: the first
    time one is seen so, it counts as ended now (it may have ended since the last poll); later
    it is not watched, so a job that outlived a killed runner never makes the wait spin.
    Waiting for only some jobs of a run (``xcore wait EXP/WU``), the run's end may come long
    after theirs: then the wait lasts at most PARTIAL_WAIT_SECS, so the core polls as often
    as it would without this hook."""
    wanted: dict[str, set[int]] = {}
    for handle in handles:
        wanted.setdefault(handle.run_dir, set()).add(handle.index)
    if any(_partial(run_dir, indexes) for run_dir, indexes in wanted.items()):
        timeout = min(timeout, PARTIAL_WAIT_SECS)
    poller = select.poll()
    fds: list[int] = []
    watched: set[int] = set()
    newly_ended = False
    try:
        for run_dir in wanted:
            if run_dir in _ENDED_RUNS:
                continue
            if len(fds) >= MAX_WATCHED_RUNS:
                break
            try:
                fd = os.open(Path(run_dir) / DONE_FIFO, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                _ENDED_RUNS.add(run_dir)  # an older run, or its directory is gone: nothing to watch
                continue
            fds.append(fd)
            # Opened first, checked second: a runner alive now was the FIFO's writer when it was
            # opened, so its letting go will be reported; one that had let go would never be.
            if _runner_alive(Path(run_dir)):
                poller.register(fd, select.POLLIN)  # POLLHUP is always reported
                watched.add(fd)
            else:
                _ENDED_RUNS.add(run_dir)
                newly_ended = True
        if not watched:
            if not newly_ended:
                time.sleep(timeout)
            return
        deadline = time.monotonic() + timeout
        while watched:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            for fd, _ in poller.poll(max(1, int(left * 1000))):
                poller.unregister(fd)
                watched.discard(fd)
    finally:
        for fd in fds:
            os.close(fd)


_ENDED_RUNS: set[str] = set()  # run directories this process saw without a runner
_RUN_SIZES: dict[str, int] = {}  # run directory -> how many jobs its batch has (it never changes)
PARTIAL_WAIT_SECS = 0.25


def _partial(run_dir: str, indexes: set[int]) -> bool:
    """Does the run have a job, not among ``indexes``, that has not ended? (Then its end may
    come long after theirs.) A launcher's wait passes the jobs still active at its last poll:
    the others of the run ended, so the wait is not partial and lasts until the run ends."""
    size = _run_size(run_dir)
    if len(indexes) >= size:
        return False
    ended = read_events(run_dir)
    return any(i not in indexes and "exit" not in ended.get(i, {}) for i in range(size))


def _run_size(run_dir: str) -> int:
    if run_dir not in _RUN_SIZES:
        batch = _read_json(Path(run_dir) / "batch.json")
        if batch is None:
            return 1 << 30  # unknown (withdrawn, gone): take the wait as partial
        _RUN_SIZES[run_dir] = len(batch.get("jobs") or [])
    return _RUN_SIZES[run_dir]


_RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")  # see xlocal.runner
# The runner is loaded from its file by path, not imported as xlocal.runner (the package imports
# xcore), through the loader so that it runs from its cached bytecode: a script given by path is
# compiled on every start (~6 ms). -S: no site (.pth files, site-packages); -P: nothing from the
# working directory. PYTHON* variables apply as to any Python.
_RUNNER_BOOT = ("import sys; from importlib.machinery import SourceFileLoader; "
                "code = SourceFileLoader('runner', sys.argv[1]).get_code('runner'); "
                "namespace = {'__name__': 'runner', '__file__': sys.argv[1]}; exec(code, namespace); "
                "namespace['main'](sys.argv[2:])")


def runner_command(*args: str) -> list[str]:
    """The command line of a runner (see xlocal.runner) with ``args``."""
    return [sys.executable, "-S", "-P", "-c", _RUNNER_BOOT, _RUNNER, *args]


class _EventReader:
    """A run's ``events.jsonl``, read from where the last read ended: the runner only appends
    whole lines, so a poll of thousands of jobs parses only the lines written since the last
    one, not the whole file again. A last line without its newline is read again next time."""

    def __init__(self, path: str) -> None:
        self.path, self.offset = path, 0
        self.jobs: dict[int, dict[str, Any]] = {}
        self.lock = threading.Lock()  # threads of one process (a wait, an output follower) share it

    def read(self) -> dict[int, dict[str, Any]]:
        with self.lock:
            try:
                with open(self.path, "rb") as log:
                    log.seek(self.offset)
                    data = log.read()
            except FileNotFoundError:
                return dict(self.jobs)
            end = data.rfind(b"\n") + 1
            for event in _parse_lines(data[:end]):
                if event["e"] == "retry":  # every failed attempt is kept, in order
                    self.jobs.setdefault(event["i"], {}).setdefault("retries", []).append(event)
                else:
                    self.jobs.setdefault(event["i"], {})[event["e"]] = event
            self.offset += end
            return dict(self.jobs)  # a snapshot: a later read by another thread does not change it


def _parse_lines(data: bytes) -> list[dict[str, Any]]:
    """The events of whole lines: parsed as one JSON array (a 2,000-job run's 4,000 lines
    eight times faster than a ``json.loads`` per line), or line by line, skipping any line
    never written whole (the runner died in the middle of it), if that fails."""
    if not data:
        return []
    try:
        events = json.loads(b"[" + data.rstrip(b"\n").replace(b"\n", b",") + b"]")
        if all(isinstance(event, dict) for event in events):
            return events
    except ValueError:
        pass
    parsed = []
    for line in data.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            parsed.append(event)
    return parsed


_EVENT_READERS: dict[str, _EventReader] = {}
MAX_EVENT_READERS = 256  # runs whose events a long-lived process keeps parsed


_EVENT_READERS_LOCK = threading.Lock()


def read_events(run_dir: str | os.PathLike[str]) -> dict[int, dict[str, Any]]:
    """Per job index of the run: its ``start`` and ``exit`` events as recorded so far."""
    key = os.fspath(run_dir)
    with _EVENT_READERS_LOCK:
        reader = _EVENT_READERS.pop(key, None) or _EventReader(os.path.join(key, "events.jsonl"))
        _EVENT_READERS[key] = reader  # most recently used last
        while len(_EVENT_READERS) > MAX_EVENT_READERS:
            del _EVENT_READERS[next(iter(_EVENT_READERS))]
    return reader.read()


def job_env(handle: ProcessHandle) -> dict[str, str] | None:
    """The job's own environment as launched, from its run's 0600 batch file (secrets in
    clear); None once the run directory is gone."""
    batch = _read_json(Path(handle.run_dir) / "batch.json")
    jobs = (batch or {}).get("jobs") or []
    if not 0 <= handle.index < len(jobs):
        return None
    return {str(k): str(v) for k, v in (jobs[handle.index].get("env") or {}).items()}


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads(path.read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _alive(record: dict[str, Any] | None) -> bool:
    """Is the process in ``record`` (pid and spawn time ``t``) still running, and not a reused pid?"""
    if not record:
        return False
    started = process_start_time(int(record["pid"]))
    if started is None:
        return False
    return record.get("t") is None or abs(started - record["t"]) < 5.0


def states(handles: Sequence[ProcessHandle]) -> list[JobState]:
    runs: dict[str, _RunView | None] = {}
    result = []
    for handle in handles:
        if handle.run_dir in runs:
            run = runs[handle.run_dir]
        else:
            run = runs[handle.run_dir] = _RunView(Path(handle.run_dir)) if os.path.isdir(handle.run_dir) else None
        if run is None:  # state directory cleaned up: xlocal no longer knows the job
            result.append(lost_state(f"its run directory {handle.run_dir} is gone"))
            continue
        job = run.job(handle.index)
        if "exit" not in job and not run.runner_alive():
            job = run.job(handle.index)  # re-read after the runner's death: it logs every event before exiting
        result.append(_state(handle, job, run))
    return result


class _RunView:
    """One run directory's event log and runner liveness, each read at most once per query."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._events: dict[int, dict[str, Any]] | None = None
        self._alive: bool | None = None
        self._why: str | None = None  # why_waiting's answer: the same for every waiting job of the run
        self._cancelled: set[str] | None = None

    def cancel_requested(self, index: int) -> bool:
        """Is there a cancel marker for job ``index``? One listing of jobs/ per query, not a
        stat per job (markers are only ever added, see ``_cancel_marker``)."""
        if self._cancelled is None:
            try:
                self._cancelled = set(os.listdir(self.run_dir / "jobs"))
            except OSError:
                self._cancelled = set()
        return f"{index}.cancel" in self._cancelled

    def job(self, index: int) -> dict[str, Any]:
        if self._events is None:
            self._events = read_events(self.run_dir)
        return self._events.get(index, {})

    def why_waiting(self) -> str:
        """Why a job of this run that has not started waits: the launch's ``max_parallel`` is
        reached, or every machine slot is taken (counted from the kernel's lock table, without
        touching the locks the runners take). Worked out once per status query of the run."""
        if self._why is None:
            self._why = self._work_out_why()
        return self._why

    def _work_out_why(self) -> str:
        batch = _read_json(self.run_dir / "batch.json") or {}
        limit = batch.get("max_parallel")
        if self._events is None:
            self._events = read_events(self.run_dir)
        running = sum(1 for job in self._events.values() if "start" in job and "exit" not in job)
        if limit and running >= limit:
            return f"waiting: {running} of this launch's max_parallel={limit} are running"
        slots, slots_dir = batch.get("slots"), batch.get("slots_dir")
        busy = busy_slots(slots_dir, slots) if slots and slots_dir else None
        return "waiting for a free slot" if busy is None else f"waiting for a slot ({busy} of {slots} busy)"

    def runner_alive(self) -> bool:
        if self._alive is None:
            self._alive = _runner_alive(self.run_dir)
            if not self._alive:
                self._events = None  # events read before this check may be missing the runner's last lines
                self._cancelled = None  # and markers written before those lines, listed before them
        return self._alive


def busy_slots(slots_dir: str, count: int) -> int | None:
    """How many of the machine's ``count`` slots are held: their lock files' inodes among the
    ``flock`` locks in ``/proc/locks`` (None where there is no such table)."""
    try:
        with open("/proc/locks") as handle:
            table = handle.read()
    except OSError:
        return None
    held = set()
    for line in table.splitlines():
        fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 3499 fe:00:1541184 0 EOF"; waiters read "1: -> FLOCK"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[3] == "WRITE":
            held.add(fields[5].rsplit(":", 1)[-1])
    busy = 0
    for k in range(count):
        try:
            inode = os.stat(os.path.join(slots_dir, f"slot-{k}.lock")).st_ino
        except OSError:
            continue
        busy += str(inode) in held
    return busy


def _runner_alive(run_dir: Path) -> bool:
    """Whether the batch's runner still runs: someone holds ``runner.lock`` (see xlocal.runner)."""
    try:
        fd = os.open(run_dir / "runner.lock", os.O_RDONLY)
    except FileNotFoundError:
        return _legacy_runner_alive(run_dir)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return True
        raise
    finally:
        os.close(fd)  # also drops the shared lock if we got it
    return False


def _legacy_runner_alive(run_dir: Path) -> bool:
    """Runs launched before runner.lock existed: runner.json, or a few seconds' grace to write it."""
    if _alive(_read_json(run_dir / "runner.json")):
        return True
    try:
        return not (run_dir / "runner.json").exists() and time.time() - (run_dir / "batch.json").stat().st_mtime < 30
    except FileNotFoundError:
        return False


def _state(handle: ProcessHandle, job: dict[str, Any], run: _RunView) -> JobState:
    state = _attempt_state(handle, job, run)
    retries = job.get("retries")
    if not retries:
        return state
    # The runner retried it (its policy): the attempt it is on, and those that failed before.
    earlier = tuple(Attempt(r["attempt"], Status.FAILED, r["failure"], _code(r["rc"]), r.get("started"), r["t"],
                            describe_exit(r["rc"])) for r in retries)
    last = retries[-1]
    started = job.get("start")
    if "exit" not in job and (started is None or started["t"] < last["t"]) and state.status.is_active:
        wait = max(0.0, last.get("at", last["t"]) - time.time())
        state = JobState(Status.PENDING, f"retrying: attempt {last['attempt']} failed ({last['failure']}, "
                         f"{describe_exit(last['rc'])}); attempt {last['next']} starts"
                         + (f" in {wait:.0f} s" if wait >= 1 else ""))
    return attrs.evolve(state, attempt=last["next"], previous_attempts=earlier)


def _code(returncode: int | None) -> int | None:
    return None if returncode is None else (128 - returncode if returncode < 0 else returncode)


def _attempt_state(handle: ProcessHandle, job: dict[str, Any], run: _RunView) -> JobState:
    started, ended = job.get("start"), job.get("exit")
    succeeded = ended is not None and ended.get("rc") == 0
    cancelled = not succeeded and run.cancel_requested(handle.index)
    start_time = started["t"] if started else None
    if ended is not None:
        final = _final_state(ended, cancelled, start_time)
        if started is not None and started.get("gpus"):
            final = attrs.evolve(final, message=f"{final.message}{_on_gpus(started)}")
        return final
    if started is not None:
        if _alive(started):
            return JobState(Status.RUNNING, f"pid {started['pid']}{_on_gpus(started)}", started_at=start_time)
        if run.runner_alive():
            return JobState(Status.RUNNING, "finishing", started_at=start_time)
        return JobState(Status.CANCELLED if cancelled else Status.FAILED,
                        "exit status lost: the xlocal runner was killed", started_at=start_time)
    if run.runner_alive():
        waiting = job["wait"]["why"] if "wait" in job else run.why_waiting()
        return JobState(Status.CANCELLED, "cancelled") if cancelled else _waiting(waiting)
    return JobState(Status.CANCELLED if cancelled else Status.FAILED,
                    "the xlocal runner exited before starting the job")


_WAITING: dict[str, JobState] = {}  # why -> the one state of every job waiting for that reason


def _waiting(why: str) -> JobState:
    """One (frozen) state per reason, the same object from one query to the next: a watcher
    polling a run's 999 queued jobs sees the very state it applied last time and skips them."""
    if (state := _WAITING.get(why)) is None:
        if len(_WAITING) >= 256:  # reasons with counts in them: keep the recent ones
            _WAITING.clear()
        state = _WAITING[why] = JobState(Status.PENDING, why)
    return state


def _on_gpus(started: dict[str, Any]) -> str:
    """`` on GPU 0,1``: the devices a job got (their index, or id when no index is known)."""
    devices = started.get("gpus")
    return f" on GPU {','.join(devices)}" if devices else ""


def _final_state(ended: dict[str, Any], cancelled: bool, started_at: float | None) -> JobState:
    code, when, error = ended.get("rc"), ended.get("t"), ended.get("error")
    if ended.get("dep"):  # never started: a dependency ended otherwise (``xlocal.runner._after``)
        return JobState(Status.CANCELLED, ended["dep"], None, None, when)
    state = exit_state(code, cancelled=cancelled, started_at=started_at, ended_at=when)
    if code == -9 and state.status is Status.FAILED:  # SIGKILL xcore did not send: the kernel's OOM killer
        state = attrs.evolve(state, failure="out_of_memory")
    if error and state.status is Status.FAILED:  # the runner could not start it: its words say why
        return JobState(Status.FAILED, error, state.exit_code, started_at, when)
    return state


def _cancel_marker(handle: ProcessHandle) -> Path:
    """The runner skips a job whose marker exists (see xlocal.runner)."""
    return Path(handle.run_dir) / "jobs" / f"{handle.index}.cancel"


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


def _running_pids(handles: Sequence[ProcessHandle]) -> list[int]:
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    pids = []
    for handle in handles:
        if handle.run_dir not in runs:
            runs[handle.run_dir] = read_events(Path(handle.run_dir))
        job = runs[handle.run_dir].get(handle.index, {})
        if job.get("start") and "exit" not in job and _alive(job["start"]):
            pids.append(int(job["start"]["pid"]))
    return pids


def cancel(handles: Sequence[ProcessHandle]) -> None:
    """Mark jobs cancelled, then TERM each running job's whole tree and KILL what outlives its grace."""
    for handle in handles:
        if os.path.isdir(handle.run_dir):
            mark_cancelled(_cancel_marker(handle))
    targets = _running_pids(handles)
    time.sleep(0.05)  # a job the runner was starting as we marked it shows up now
    targets = sorted(set(targets) | set(_running_pids(handles)))
    if not targets:
        return
    tree = sorted({p for pid in targets for p in [pid, *_descendants(pid)]})
    _signal_tree(tree, signal.SIGTERM)
    deadline = time.monotonic() + max(h.kill_grace_secs for h in handles)
    while time.monotonic() < deadline:
        if not any(process_start_time(p) for p in tree):
            return
        time.sleep(0.05)
    tree = sorted({p for p in tree if process_start_time(p)} | {d for p in targets for d in _descendants(p)})
    _signal_tree(tree, signal.SIGKILL)


def logs(handle: ProcessHandle, follow: bool) -> Iterator[str]:
    def ended() -> bool:
        return states([handle])[0].status.is_terminal

    return follow_file(handle.log_path or "", follow=follow, finished=ended, poll_secs=0.1)
