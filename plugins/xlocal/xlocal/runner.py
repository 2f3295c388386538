"""The detached runner: starts launch batches' jobs, at most N at a time, and records how each ended.

Run with ``RUN_DIR LOCK_FD DONE_FD`` for one batch, or with ``--serve SOCKET_FD``: started
by a launcher ahead of time, it takes each batch (its RUN_DIR and the two descriptors) over
the socket, acknowledges it, and runs every batch handed over until the launcher is gone and
all of them ended (or, idle, exits after IDLE_SECS). In its own session either way, so jobs
keep running and exit codes are still recorded after the launcher exits. Loaded from this
file by ``xlocal.processes.runner_command`` (or run as a file), never as ``xlocal.runner``:
the package would import xcore. Its start-up delays a launch's first job, so it imports only
a few built-in standard modules (no json, socket, pathlib or contextlib; subprocess only when
a job needs it).

Files in RUN_DIR (private to the user: the directory is 0700, files 0600):
- ``batch.json``: the jobs, their argv, env, cwd and log paths;
- ``runner.lock``: locked (``flock``) by the launcher before it hands the batch over, and
  held through the descriptor LOCK_FD until every job of the batch ended; the kernel
  releases it when the runner exits, however it dies. A reader that can lock it knows no
  runner works on the batch any more; there is no moment at which a live one looks gone;
- ``done.fifo``: a FIFO whose write end is held like the lock (descriptor DONE_FD); readers
  see a hang-up the moment it is let go of, which is how ``xcore wait`` learns at once that
  a batch ended;
- ``runner.json``: the runner's pid and start time (informative);
- ``events.jsonl``: one line per job start (pid, time) and end (return code,
  time, error); the runner is its only writer and appends whole lines, so a reader needs
  one read per run, and ignores a torn last line;
- ``jobs/N.cancel``: written by ``xcore cancel``; a job not yet started is then skipped;
- ``space.reserve``: room allocated for the batch's last events, freed when the disk is full
  (the jobs not started then end with "not started: no space left on device"), else at the end.

Each job's output goes to its log (path in batch.json, 0600, appended to). While every slot
is busy, the runner creates the next jobs' logs ahead (``LogOpener``) and a job inherits its
open log; a log is never written by anyone but its job (or the runner's note that it could
not start).

Retries (``docs/long-runs.md``): a job whose spec has ``"retry"`` (``max`` attempts, the
failure classes ``on``, exit ``codes``, ``backoff`` seconds) is started again when it fails
so: its slot is let go of, a ``retry`` event records the failed attempt (return code, class,
times) and after the backoff the job starts again as the next attempt, with a line in its log.
A job killed by SIGKILL that xcore did not cancel reads ``out_of_memory`` (the kernel's OOM
killer), any other failure ``error``; a cancelled job is never started again. Every job gets
``XCORE_ATTEMPT`` and, with ``"checkpoint"`` in its spec, ``XCORE_CHECKPOINT_DIR`` (created 0700).

Machine-wide, at most ``slots`` jobs run at once across all runners: a job holds an
exclusive ``flock`` on one of ``SLOTS_DIR/slot-K.lock`` while it runs. The kernel releases
the lock if the runner dies, so a crash never leaks a slot.

A job that asks for GPUs (``"gpu": [count, device set, share]`` in batch.json, the devices
under ``"gpus"``) holds device locks instead of a slot (``GpuPool``), gets the devices'
ids in ``CUDA_VISIBLE_DEVICES`` (or the batch's variable), and its start event lists them;
while they are busy it waits in order, and a ``wait`` event gives the reason
(``waiting for 2 GPUs (4 of 4 busy)``). Jobs without GPUs never touch the device locks.
"""

from __future__ import annotations

import _socket
import array
import errno
import fcntl
import os
import select
import sys
import time

TYPE_CHECKING = False  # not typing's: the runner imports as little as it can
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def _json_codec() -> tuple[Callable[[bytes | str], Any], Callable[[Any], str]]:
    """``(loads, dumps)`` as json's, made from its C half: the json package imports re and
    compiles its patterns, ~10 ms of CPU, a third of the runner's start-up. json's own if the
    C half is missing or differs."""
    try:
        import _json

        class Options:  # what json.JSONDecoder passes its C scanner, with json.loads's defaults
            strict, object_hook, object_pairs_hook = True, None, None
            parse_float, parse_int, parse_constant = float, int, float  # float("NaN"), float("-Infinity")
            memo: dict[str, str] = {}

        scan = _json.make_scanner(Options())  # type: ignore[arg-type]  # typeshed knows only JSONDecoder

        def unserializable(value: Any) -> Any:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

        # json.dumps's defaults: ", " and ": ", ASCII only, no sorting, NaN allowed, no cycle check
        encode = _json.make_encoder(None, unserializable, _json.encode_basestring_ascii, None, ": ", ", ",
                                    False, False, True)

        def loads(text: bytes | str) -> Any:
            text = text.decode() if isinstance(text, bytes) else text
            try:
                value, end = scan(text, 0)
            except StopIteration:
                raise ValueError("not JSON") from None
            if text[end:].strip():
                raise ValueError("not a whole JSON document")
            return value

        def dumps(value: Any) -> str:
            return "".join(encode(value, 0))

        if loads(dumps({"a": [1, 0.5, "é", None, True]})) == {"a": [1, 0.5, "é", None, True]}:
            return loads, dumps
    except (ImportError, AttributeError, TypeError, ValueError):
        pass
    import json

    return json.loads, json.dumps


json_loads, json_dumps = _json_codec()


def write_json_atomic(path: str, data: Any, mode: int = 0o600) -> None:
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        handle.write(json_dumps(data))  # json.dump would use the slow pure-Python encoder
    os.replace(tmp, path)


class EventLog:
    """Appends one JSON line per event to ``events.jsonl``.

    A full disk must not cost the events of the jobs already started: ``reserve`` (a file
    allocated up front, room for an end line per job) is let go of at the first ENOSPC, and
    ``full`` says so from then on (the runner then starts no more jobs of the batch and records
    why instead, in the room the reserve left)."""

    def __init__(self, path: str, reserve: str | None = None, reserve_bytes: int = 0) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.full = False
        self._pending = b""
        self._reserve = reserve
        if reserve is not None:
            try:
                fd = os.open(reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    os.posix_fallocate(fd, 0, reserve_bytes)
                finally:
                    os.close(fd)
            except OSError:  # already full, or a file system without fallocate: no reserve
                self._release()

    def _release(self) -> None:
        if self._reserve is not None:
            try:
                os.unlink(self._reserve)
            except OSError:
                pass
            self._reserve = None

    def _append(self, data: bytes) -> None:
        """Write the whole line; a write cut short by a full disk goes on once the reserve is
        freed, or is kept and written ahead of the next line (lines stay whole and in order)."""
        data, self._pending = self._pending + data, b""
        while data:
            try:
                data = data[os.write(self._fd, data):]
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                self.full = True
                if self._reserve is None:
                    self._pending = data  # never a crash: the runner's other jobs and batches go on
                    return
                self._release()

    def write(self, **event: Any) -> None:
        self._append((json_dumps(event) + "\n").encode())

    # The two lines written per job, formatted directly: the very text ``write`` gives them
    # (json.dumps writes a float as its repr), without a dict and the encoder per event.
    def started(self, index: int, pid: int, when: float, gpus: list[str] | None = None) -> None:
        if gpus:
            self.write(i=index, e="start", pid=pid, t=when, gpus=gpus)
            return
        self._append(f'{{"i": {index:d}, "e": "start", "pid": {pid:d}, "t": {when!r}}}\n'.encode())

    def ended(self, index: int, returncode: int, when: float) -> None:
        self._append(f'{{"i": {index:d}, "e": "exit", "rc": {returncode:d}, "t": {when!r}, "error": null}}\n'
                     .encode())

    def close(self) -> None:
        if self._pending:
            self._append(b"")  # a last try: space may be back
        os.close(self._fd)
        self._release()


def process_start_time(pid: int) -> float | None:
    """When ``pid`` started (UNIX time, ~10 ms precision), or None if there is no such process.

    Compared with the time recorded at spawn, it tells a live job from a reused pid. Read
    only by status queries: reading it right after spawning would block until exec finishes.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        if fields[0] == b"Z":
            return None  # exited, not yet reaped
        return _boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _boot_time() -> float:
    with open("/proc/stat", "rb") as stat:
        for line in stat:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


class SlotPool:
    """The machine's slots; each slot file is opened once and then only locked and unlocked."""

    def __init__(self, slots_dir: str, count: int) -> None:
        os.makedirs(slots_dir, mode=0o700, exist_ok=True)
        self.paths = [os.path.join(slots_dir, f"slot-{k}.lock") for k in range(count)]
        self.fds: dict[int, int] = {}  # slot -> its open file
        self.held: set[int] = set()

    def acquire(self) -> int | None:
        for slot, path in enumerate(self.paths):
            if slot in self.held:
                continue
            fd = self.fds.get(slot)
            if fd is None:
                fd = self.fds[slot] = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    continue
                raise
            self.held.add(slot)
            return slot
        return None

    def release(self, slot: int) -> None:
        self.held.remove(slot)
        fcntl.flock(self.fds[slot], fcntl.LOCK_UN)


class GpuPool:
    """The machine's GPUs (those in batch.json), locked per device in ``lock_dir`` like the slots.

    ``gpu-KEY.lock``: an exclusive job holds it exclusively; jobs that share devices hold it
    shared, plus one of ``gpu-KEY.share-K.lock`` (K < the job's ``gpu_share``) exclusively,
    so at most that many share a device and never with an exclusive job. Each file is opened
    once; this runner never takes a device it holds in one mode in the other (``flock`` would
    convert the lock), and counts its own shared holders so the last one unlocks."""

    def __init__(self, lock_dir: str) -> None:
        os.makedirs(lock_dir, mode=0o700, exist_ok=True)
        self.dir = lock_dir
        self.fds: dict[str, int] = {}  # lock file name -> its open file
        self.exclusive: set[str] = set()  # device keys this runner holds exclusively
        self.sharers: dict[str, int] = {}  # device key -> how many of this runner's jobs share it
        self.share_slots: set[tuple[str, int]] = set()
        self.others_busy = False  # did the last failed acquire meet a device another process holds?
        self.busy = 0  # how many of the devices asked for the last failed acquire could not get

    def _try(self, name: str, mode: int) -> bool:
        fd = self.fds.get(name)
        if fd is None:
            fd = self.fds[name] = os.open(os.path.join(self.dir, name), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                self.others_busy = True
                return False
            raise
        return True

    def _take(self, key: str, share: int, slot: int) -> bool:
        if key in self.exclusive:
            return False
        if share <= 1:
            if key in self.sharers or not self._try(f"gpu-{key}.lock", fcntl.LOCK_EX):
                return False
            self.exclusive.add(key)
            return True
        if (key, slot) in self.share_slots or not self._try(f"gpu-{key}.share-{slot}.lock", fcntl.LOCK_EX):
            return False
        if key not in self.sharers and not self._try(f"gpu-{key}.lock", fcntl.LOCK_SH):
            fcntl.flock(self.fds[f"gpu-{key}.share-{slot}.lock"], fcntl.LOCK_UN)
            return False
        self.sharers[key] = self.sharers.get(key, 0) + 1
        self.share_slots.add((key, slot))
        return True

    def acquire(self, keys: list[str], count: int, share: int) -> list[tuple[str, int]] | None:
        """``count`` of the devices ``keys`` as ``(key, share slot)``, or None (nothing held)
        if fewer are free. Sharing jobs spread out: the first share slot of every device is
        tried before the second of any."""
        self.others_busy = False
        taken: list[tuple[str, int]] = []
        for slot in range(max(1, share)):
            for key in keys:
                if len(taken) < count and all(key != k for k, _ in taken) and self._take(key, share, slot):
                    taken.append((key, slot))
        if len(taken) == count:
            return taken
        self.busy = len(keys) - len(taken)  # a failed acquire tried every device in every slot
        self.release(taken)
        return None

    def release(self, taken: list[tuple[str, int]]) -> None:
        for key, slot in taken:
            if key in self.exclusive:
                self.exclusive.remove(key)
                fcntl.flock(self.fds[f"gpu-{key}.lock"], fcntl.LOCK_UN)
                continue
            self.share_slots.remove((key, slot))
            fcntl.flock(self.fds[f"gpu-{key}.share-{slot}.lock"], fcntl.LOCK_UN)
            self.sharers[key] -= 1
            if not self.sharers[key]:
                del self.sharers[key]
                fcntl.flock(self.fds[f"gpu-{key}.lock"], fcntl.LOCK_UN)


class LogOpener:
    """Opens (creates) the log files of a run's next jobs ahead of their start, at most AHEAD,
    in the runner's idle moments: while every slot is busy and no job has ended yet. Creating
    a file on a busy ext4 disk takes 0.05-0.5 ms, and a job that opens its log as it starts (a
    posix_spawn file action) keeps its slot and the runner (blocked in posix_spawn) waiting
    meanwhile; opened here, the job only inherits the descriptor. A log that exists but is
    empty reads exactly like one not yet created (``xcore logs`` yields nothing for both); a
    job whose log was not opened ahead (or could not be) opens it itself as it starts. No
    thread: one would compete with the jobs for the cores and for the GIL."""

    AHEAD = 16

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self._jobs, self._cursor = jobs, 0
        self._ready: dict[int, int] = {}  # index -> descriptor (O_CLOEXEC: no other job inherits it)

    def take(self, index: int) -> int | None:
        """The open log of job ``index`` (the caller owns it), or None: then the job opens it.
        Jobs are taken in order; those skipped (cancelled) are dropped with ``take`` too."""
        self._cursor = max(self._cursor, index + 1)
        return self._ready.pop(index, None)

    def wanted(self, first: int) -> bool:
        """Is there a log to open ahead (of the jobs from ``first``, fewer than AHEAD open)?"""
        self._cursor = max(self._cursor, first)
        return len(self._ready) < self.AHEAD and self._cursor < len(self._jobs)

    def open_next(self) -> None:
        """Open the log of the next job not opened yet (after ``wanted`` said there is one)."""
        index = self._cursor
        self._cursor += 1
        try:
            self._ready[index] = os.open(self._jobs[index]["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                                         0o600)
        except Exception:  # noqa: BLE001, S110  the job opens it itself, and reports what is wrong
            pass

    def close(self) -> None:
        for fd in self._ready.values():
            os.close(fd)
        self._ready.clear()


SLOT_WAIT_MIN, SLOT_WAIT_MAX = 0.002, 0.05  # seconds between looks for a slot another runner holds
IDLE_SECS = 120.0  # a serving runner with no run left exits after this long without a new one


class Run:
    """One launch batch: its jobs in order, at most ``limit`` at once. ``fds`` (the lock on
    runner.lock and the write end of done.fifo) are held until every job of it ended."""

    def __init__(self, run_dir: str, fds: tuple[int, ...]) -> None:
        self.dir, self.fds = run_dir, fds
        with open(os.path.join(run_dir, "batch.json"), "rb") as file:
            self.batch = json_loads(file.read())
        self.cwd = self.batch.get("cwd") or "/"
        self.jobs_dir = os.path.join(run_dir, "jobs")
        os.makedirs(self.jobs_dir, mode=0o700, exist_ok=True)
        # Room for an end line per job (and the reason the rest were not started) on a full disk.
        self.events = EventLog(os.path.join(run_dir, "events.jsonl"), os.path.join(run_dir, "space.reserve"),
                               (200 + len(run_dir)) * len(self.batch["jobs"]) + 4096)
        self.base_env = self.batch.get("base_env") or {}
        self.slots = (self.batch["slots_dir"], int(self.batch["slots"]))
        # Without max_parallel, the slots bound CPU jobs and the devices GPU jobs (which hold no slot).
        self.limit = int(self.batch.get("max_parallel") or (1 << 62 if "gpus" in self.batch else self.batch["slots"]))
        self.count, self.next, self.running = len(self.batch["jobs"]), 0, 0
        self.gpus: dict[str, Any] | None = self.batch.get("gpus")  # the devices, if a job asks for some
        self.waiting: tuple[int, Any] | None = None  # (job, busy devices or reason) of the last "wait" event
        self.again: list[tuple[float, int]] = []  # (when, job) of failed jobs to start again, soonest first
        self.attempts: dict[int, int] = {}  # job -> its attempt now, for jobs started more than once
        self.opener = LogOpener(self.batch["jobs"])
        me = {"pid": os.getpid(), "t": process_start_time(os.getpid())}
        try:
            write_json_atomic(os.path.join(run_dir, "runner.json"), me)
        except OSError as exc:  # informative; but its presence says a runner took the batch
            if exc.errno != errno.ENOSPC:
                raise
            os.close(os.open(os.path.join(run_dir, "runner.json"), os.O_WRONLY | os.O_CREAT, 0o600))

    @property
    def over(self) -> bool:
        return self.next >= self.count and self.running == 0 and not self.again

    def attempt(self, index: int) -> int:
        return self.attempts.get(index) or self.batch["jobs"][index].get("attempt", 1)

    def close(self) -> None:
        """Every job ended and was logged: let go of the lock and hang up done.fifo."""
        self.opener.close()
        self.events.close()
        for fd in self.fds:
            os.close(fd)


def run(run_dir: str) -> None:
    serve([Run(run_dir, ())], None)  # its lock and FIFO are released when the process exits


def serve(runs: list[Run], channel: Any) -> None:
    """Run ``runs`` and, while ``channel`` (a socket from the launcher) is open, every run it
    hands over, oldest first; each is closed as soon as all its jobs ended. A crash is
    written to the runner.log of every run still open (their jobs then read FAILED)."""
    try:
        _serve(runs, channel)
    except BaseException:
        import traceback

        for open_run in runs:
            _log(open_run.dir, traceback.format_exc())
        raise


def _serve(runs: list[Run], channel: Any) -> None:
    pools: dict[tuple[str, int], SlotPool] = {}
    gpu_pools: dict[str, GpuPool] = {}
    running: dict[int, tuple[SpawnedJob, Run, int, Any, Any]] = {}  # pidfd -> (job, run, index, pool, held)
    poller = select.poll()
    if channel is not None:
        poller.register(channel.fileno(), select.POLLIN)
    slot_wait, here = SLOT_WAIT_MIN, None
    while runs or running or channel is not None:
        blocked = False  # a job waits for a slot another runner holds (one of ours wakes the poll as it ends)
        dep_wait = False  # a job waits for a job of another run (or runner): look again soon
        for run_ in runs:
            pool = pools.get(run_.slots) or pools.setdefault(run_.slots, SlotPool(*run_.slots))
            while run_.again and run_.again[0][0] <= time.time() and run_.running < run_.limit:
                _, index = run_.again[0]
                if os.path.exists(os.path.join(run_.jobs_dir, f"{index}.cancel")):
                    run_.again.pop(0)
                    run_.events.write(i=index, e="exit", rc=None, t=time.time(), error="cancelled before it started")
                    continue
                again_slot = pool.acquire()
                if again_slot is None:
                    blocked = blocked or len(pool.held) < len(pool.paths)
                    break
                run_.again.pop(0)
                if run_.cwd != here:
                    here = _enter(run_.cwd)
                started = start_job(run_.batch["jobs"][index], index, run_.base_env, run_.events, None, None,
                                    run_.attempt(index))
                if started is None:
                    pool.release(again_slot)
                    continue
                run_.running += 1
                pidfd = os.pidfd_open(started.pid)
                poller.register(pidfd, select.POLLIN)
                running[pidfd] = (started, run_, index, pool, again_slot)
            while run_.next < run_.count and run_.running < run_.limit:
                index = run_.next
                if os.path.exists(os.path.join(run_.jobs_dir, f"{index}.cancel")):
                    if (log_fd := run_.opener.take(index)) is not None:
                        os.close(log_fd)
                    run_.events.write(i=index, e="exit", rc=None, t=time.time(), error="cancelled before it started")
                    run_.next += 1
                    continue
                if run_.events.full:  # no room to record a start: say why it was not started
                    if (log_fd := run_.opener.take(index)) is not None:
                        os.close(log_fd)
                    run_.events.write(i=index, e="exit", rc=127, t=time.time(),
                                      error=f"not started: no space left on device ({run_.dir})")
                    run_.next += 1
                    continue
                spec = run_.batch["jobs"][index]
                if "after" in spec:  # it waits for other jobs (xcore's depends_on)
                    verdict = _after(run_, index, spec["after"])
                    if verdict is None:
                        dep_wait = True
                        break
                    if verdict:  # a dependency ended otherwise: it never runs
                        if (log_fd := run_.opener.take(index)) is not None:
                            os.close(log_fd)
                        run_.events.write(i=index, e="exit", rc=None, t=time.time(), dep=verdict)
                        run_.next += 1
                        continue
                gpu, gpu_env = spec.get("gpu"), None
                holder: Any = pool
                if gpu is None:  # the common case: a CPU slot
                    slot: Any = pool.acquire()
                    if slot is None:
                        blocked = blocked or len(pool.held) < len(pool.paths)
                        break
                else:  # GPUs instead of a slot
                    holder, slot, gpu_env = _take_gpus(run_, index, gpu, gpu_pools)
                    if slot is None:
                        blocked = blocked or holder.others_busy
                        break
                slot_wait = SLOT_WAIT_MIN
                if run_.cwd != here:
                    here = _enter(run_.cwd)
                log_fd = run_.opener.take(index)
                started = start_job(spec, index, run_.base_env, run_.events, log_fd, gpu_env)
                run_.next += 1
                if started is None:
                    holder.release(slot)
                    continue
                run_.running += 1
                pidfd = os.pidfd_open(started.pid)
                poller.register(pidfd, select.POLLIN)
                running[pidfd] = (started, run_, index, holder, slot)
            if blocked:
                break
        # Every slot is busy: until a job ends, open the logs of the jobs that start next (of
        # the oldest waiting run only: AHEAD descriptors however many runs wait).
        waiting = next((r for r in runs if r.next < r.count), None)
        if waiting is not None and not blocked:
            while waiting.opener.wanted(waiting.next) and not poller.poll(0):
                waiting.opener.open_next()
        for ended_run in [r for r in runs if r.over]:
            runs.remove(ended_run)
            ended_run.close()
        if not runs and not running and channel is None:
            return
        # Wait for a job to end or a new run; if other runners hold the slots, look again
        # soon, then less often; idle, wait for a new run a while, then exit.
        timeout: float | None = None
        if blocked:
            timeout, slot_wait = slot_wait, min(slot_wait * 2, SLOT_WAIT_MAX)
        elif dep_wait:
            timeout = DEPENDENCY_POLL_SECS
        elif not runs and not running:
            timeout = IDLE_SECS
        due = [r.again[0][0] for r in runs if r.again]
        if due:  # a failed job starts again after its backoff
            timeout = max(0.0, min(due) - time.time()) if timeout is None else min(timeout, min(due) - time.time())
        ready = poller.poll(None if timeout is None else max(1, int(max(0.0, timeout) * 1000)))
        if not ready and timeout == IDLE_SECS:
            channel.close()  # a run handed over just now is refused with it: its launcher starts another runner
            return
        for fd, _ in ready:
            if channel is not None and fd == channel.fileno():
                received = _receive(channel)
                if received is None:  # the launcher exited: finish what was handed over
                    poller.unregister(fd)
                    channel.close()
                    channel = None
                elif (new_run := _open_run(*received)) is not None:
                    runs.append(new_run)
                continue
            job, job_run, index, holder, held = running.pop(fd)
            poller.unregister(fd)
            returncode = job.wait()
            os.close(fd)
            if not _retried(job_run, index, returncode, job.started_at):
                job_run.events.ended(index, returncode, time.time())
            holder.release(held)
            job_run.running -= 1


DEPENDENCY_POLL_SECS = 0.2  # how often a job waiting for a job of another run looks again


def _after(run_: Run, index: int, after: list[list[Any]]) -> str | None:
    """Whether job ``index`` may start: '' yes, None not yet (a ``wait`` event says for what),
    or why it never will (``dependency 3/1 failed``). ``after``: ``[run_dir, index, when,
    name]`` per dependency (``when``: ``success`` or ``finished``)."""
    waiting = []
    for run_dir, dep, when, name in after:
        ended = _exit_event(run_dir, dep)
        if ended is None and run_dir != run_.dir and not _runner_holds(run_dir):
            # Its runner is gone (killed): read once more (it may have ended just now), else lost.
            ended = _exit_event(run_dir, dep) or {"rc": None, "error": "lost: its runner was killed"}
        if ended is None:
            waiting.append(name)
            continue
        cancelled = bool(ended.get("dep")) or ended.get("error") == "cancelled before it started" or (
            os.path.exists(os.path.join(run_dir, "jobs", f"{dep}.cancel")))
        if when != "finished" and (ended.get("rc") != 0 or cancelled):
            return f"dependency {name} {'cancelled' if cancelled else 'failed'}"
    if not waiting:
        return ""
    why = "waiting for " + ", ".join(dict.fromkeys(waiting))
    if run_.waiting != (index, why):
        run_.waiting = (index, why)
        run_.events.write(i=index, e="wait", why=why, t=time.time())
    return None


def _runner_holds(run_dir: str) -> bool:
    """Whether a runner (or the launcher handing it over) holds the run's ``runner.lock``."""
    try:
        fd = os.open(os.path.join(run_dir, "runner.lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also lets go of a lock taken just now
    return False


def _exit_event(run_dir: str, index: int) -> dict[str, Any] | None:
    """The ``exit`` event of job ``index`` of the run in ``run_dir`` (None while it runs)."""
    try:
        with open(os.path.join(run_dir, "events.jsonl"), "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    for line in data.splitlines():
        if b'"exit"' not in line:
            continue
        try:
            event = json_loads(line)
        except ValueError:
            continue
        if event.get("i") == index and event.get("e") == "exit":
            return event
    return None


def failure_class(returncode: int, cancelled: bool) -> str | None:
    """The failure class of a job that ended with ``returncode`` (Popen's: negative for a
    signal): None for success or a cancel, ``out_of_memory`` for a SIGKILL xcore did not send
    (the kernel's OOM killer), else ``error``."""
    if returncode == 0 or cancelled:
        return None
    return "out_of_memory" if returncode == -9 else "error"


def _retried(run_: Run, index: int, returncode: int, started_at: float) -> bool:
    """If the job's retry policy says so, record the failed attempt and queue the next one."""
    spec = run_.batch["jobs"][index]
    policy = spec.get("retry")
    if policy is None:
        return False
    cancelled = os.path.exists(os.path.join(run_.jobs_dir, f"{index}.cancel"))
    failure = failure_class(returncode, cancelled)
    attempt = run_.attempt(index)
    code = 128 - returncode if returncode < 0 else returncode
    if failure is None or attempt >= policy["max"] or not (
            failure in policy["on"] or (failure == "error" and code in policy["codes"])):
        return False
    now = time.time()
    delay = float(policy.get("backoff") or 0) * 2 ** (attempt - spec.get("attempt", 1))
    run_.attempts[index] = attempt + 1
    run_.events.write(i=index, e="retry", rc=returncode, t=now, started=started_at, failure=failure,
                      attempt=attempt, next=attempt + 1, at=now + delay)
    try:
        with open(spec["log_path"], "ab") as log:
            log.write(f"xcore: attempt {attempt} failed ({failure}, return code {returncode}); attempt "
                      f"{attempt + 1} starts{f' in {delay:g} s' if delay else ''}\n".encode())
    except OSError:
        pass  # the event is what counts
    run_.again.append((now + delay, index))
    run_.again.sort()
    return True


def _private_dirs(path: str) -> None:
    """``path`` and the directories above it that do not exist yet, each 0700."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        _private_dirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass


def _take_gpus(run_: Run, index: int, gpu: list[int], pools: dict[str, GpuPool],
               ) -> tuple[GpuPool, list[tuple[str, int]] | None, tuple[str, str, list[str]] | None]:
    """The devices for job ``index`` (``gpu``: count, device set, share) as ``(pool, held,
    (variable, value, keys))``; held is None if they are busy, and then the job's PENDING
    reason is written (again when the number of busy devices changes)."""
    count, device_set, share = gpu
    info: dict[str, Any] = run_.gpus  # type: ignore[assignment]  # a job with "gpu" comes with "gpus"
    pool = pools.get(info["dir"]) or pools.setdefault(info["dir"], GpuPool(info["dir"]))
    devices = info["sets"][device_set]  # [[key, id], ...]
    held = pool.acquire([key for key, _ in devices], count, share)
    if held is None:
        if run_.waiting != (index, pool.busy):
            run_.waiting = (index, pool.busy)
            gpus = "1 GPU" if count == 1 else f"{count} GPUs"
            shared = f", shared {share} ways" if share > 1 else ""
            why = f"waiting for {gpus} ({pool.busy} of {len(devices)} busy{shared})"
            run_.events.write(i=index, e="wait", why=why, t=time.time())
        return pool, None, None
    ids = dict(devices)
    keys = [key for key, _ in held]
    return pool, held, (info["env"], ",".join(ids[key] for key in keys), keys)


def _enter(directory: str) -> str:
    """Work in ``directory`` (a run's jobs then start without chdir), or in / if it is gone."""
    try:
        os.chdir(directory)
    except OSError:
        os.chdir("/")  # each job then reports its missing directory itself
    _HERE.clear()
    return directory


def _receive(channel: Any) -> tuple[str, tuple[int, ...]] | None:
    """A run handed over (its directory, lock and FIFO descriptors), acknowledged at once; None
    once the launcher is gone. Acknowledged before anything else: a launcher that got no
    answer knows nothing of its batch was started, and starts another runner for it."""
    fds = array.array("i")  # socket.recv_fds, without the socket module (its enums cost ~5 ms at start)
    try:
        data, ancillary, _flags, _addr = channel.recvmsg(65536, _socket.CMSG_SPACE(4 * fds.itemsize))
    except OSError:
        return None
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    for fd in fds:
        os.set_inheritable(fd, False)  # never to the jobs
    try:
        channel.send(b"1")
    except OSError:
        pass  # the launcher is gone: its batch runs all the same
    return os.fsdecode(data), tuple(fds)


def _open_run(run_dir: str, fds: tuple[int, ...]) -> Run | None:
    try:
        return Run(run_dir, fds)
    except Exception as exc:  # noqa: BLE001  a bad batch fails its own jobs only (the lock goes: they read FAILED)
        _log(run_dir, f"xlocal runner: cannot run {run_dir}: {type(exc).__name__}: {exc}\n")
        for fd in fds:
            os.close(fd)
        return None


def _log(run_dir: str, text: str) -> None:
    try:
        log = os.open(os.path.join(run_dir, "runner.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(log, text.encode())
        os.close(log)
    except OSError:
        pass


class SpawnedJob:
    """A started job; ``wait`` reaps it and returns a Popen-style return code."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.started_at = time.time()

    def wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


def start_job(job: dict[str, Any], index: int, base_env: dict[str, str], events: EventLog,
              log_fd: int | None = None, gpu_env: tuple[str, str, list[str]] | None = None,
              attempt: int | None = None) -> SpawnedJob | None:
    """Start a job in its own session with output to its log (``log_fd`` if the log was opened
    ahead, closed here; else the job opens it). ``posix_spawn`` (vfork) is far cheaper than
    fork+exec from Python; a job that must change directory uses Popen.

    A job that cannot start (missing program or directory, a NUL byte or ``=`` where the OS
    refuses one) is recorded as failed with the reason; the rest of the batch runs on.

    ``gpu_env``: the devices it got, ``(variable, their ids, their keys)``; the variable
    overrides the job's own, and ids given as indexes come with PCI bus order (the order
    nvidia-smi counts in) unless the job chose an order."""
    try:
        env = job["env"]
        if job.get("inherit_env", True):
            env = {**base_env, **env} if env else base_env  # shared when a job adds nothing: no copy per job
        checkpoint = job.get("checkpoint")
        if checkpoint is not None:  # the attempt and the unit's checkpoint directory (docs/long-runs.md)
            _private_dirs(checkpoint)
            env = {**env, "XCORE_ATTEMPT": str(attempt or job.get("attempt", 1)), "XCORE_CHECKPOINT_DIR": checkpoint}
        if gpu_env is not None:
            variable, ids = gpu_env[0], gpu_env[1]
            env = {**env, variable: ids}
            if variable == "CUDA_VISIBLE_DEVICES" and "CUDA_DEVICE_ORDER" not in env and ids.replace(",", "").isdigit():
                env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        argv, cwd = job["argv"], job.get("cwd") or None
        if cwd is None or _is_here(cwd):
            stdout = ((os.POSIX_SPAWN_OPEN, 1, job["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                      if log_fd is None else (os.POSIX_SPAWN_DUP2, log_fd, 1))
            pid = os.posix_spawnp(
                argv[0], argv, env,
                file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), stdout,
                              (os.POSIX_SPAWN_DUP2, 1, 2)],
                setsid=True,
            )
            started = SpawnedJob(pid)
        else:
            if not os.path.isdir(cwd):
                raise FileNotFoundError(errno.ENOENT, "working directory does not exist", cwd)
            import subprocess  # only here: most batches never need it

            if log_fd is None:
                log_fd = os.open(job["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with open(log_fd, "ab", buffering=0) as log:
                log_fd = None  # closed with ``log``
                proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
            started = SpawnedJob(proc.pid)
            proc.returncode = 0  # reaped by SpawnedJob.wait, not by Popen
    except Exception as exc:  # noqa: BLE001  one bad job must never stop the runner and the rest of the batch
        message = _start_error(job, exc)
        if log_fd is not None:
            os.close(log_fd)
            log_fd = None
        try:
            log_fd = os.open(job["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with open(log_fd, "ab") as log:
                log.write(f"xcore: {message}\n".encode())
        except (OSError, ValueError, KeyError, TypeError):
            pass  # the event below is what counts
        events.write(i=index, e="exit", rc=127, t=time.time(), error=message)
        return None
    if log_fd is not None:
        os.close(log_fd)
    events.started(index, started.pid, time.time(), gpu_env[2] if gpu_env is not None else None)
    return started


_HERE: dict[str, bool] = {}  # job cwd -> is it the runner's (which never changes after start)


def _is_here(cwd: str) -> bool:
    here = _HERE.get(cwd)
    if here is None:
        here = _HERE[cwd] = os.path.realpath(cwd) == os.getcwd()
    return here


def _start_error(job: dict[str, Any], exc: Exception) -> str:
    program = (job.get("argv") or ["?"])[0]
    if isinstance(exc, FileNotFoundError) and exc.filename and exc.filename == job.get("cwd"):
        return f"cannot start {program!r}: FileNotFoundError: working directory {exc.filename} does not exist"
    if isinstance(exc, OSError):
        return f"cannot start {program!r}: {type(exc).__name__}: {exc.strerror or exc}"
    if isinstance(exc, ValueError) and "null" in str(exc):
        return f"cannot start {program!r}: an argument or environment value contains a NUL byte"
    return f"cannot start {program!r}: {type(exc).__name__}: {exc}"


def _hold_lock(argv: list[str]) -> None:
    """Keep the launcher's lock on runner.lock and the write end of done.fifo (inherited
    descriptors) for the runner's life, without letting jobs inherit them (a job outliving
    the runner must not look like it, nor hold waiters until it ends)."""
    for fd in argv[1:3]:
        os.set_inheritable(int(fd), False)


def _serve_forever(argv: list[str]) -> None:
    """``runner.py --serve SOCKET_FD``: a runner started ahead of time by a launcher, which
    hands it each batch over the socket (see xlocal.processes)."""
    channel = _socket.socket(fileno=int(argv[1]))
    os.set_inheritable(channel.fileno(), False)
    os.chdir("/")
    serve([], channel)


def main(argv: list[str]) -> None:
    """``argv``: ``RUN_DIR LOCK_FD DONE_FD`` or ``--serve SOCKET_FD`` (see the module's docstring)."""
    if argv[0] == "--serve":
        _serve_forever(argv)
    else:
        _hold_lock(argv)
        run(argv[0])


if __name__ == "__main__":
    main(sys.argv[1:])
