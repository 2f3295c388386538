"""What differs between Slurm and Grid Engine: submit, query, cancel, and their outputs.

Each scheduler builds shell text for the login node and parses what comes back; the
transport runs it. Status needs at most two scheduler calls for any number of tasks of one
array job: Slurm ``squeue`` + ``sacct``; Grid Engine ``qstat`` + ``qacct`` per array job
whose tasks have left ``qstat``.

Each task's earlier attempts come from the same calls: ``sacct --duplicates`` keeps one
record per run of a requeued task, ``qacct`` one per run of a rescheduled one. States carry
the failure class the scheduler's own record gives (``failure``), the attempt number counted
from 1 for this submission (``attempt``) and the earlier runs (``previous_attempts``); the
caller shifts the numbers by the submission's first attempt.
"""

from __future__ import annotations

import re
import shlex
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

import attrs

from xcore.plugin import Attempt, JobState, Status, describe_exit, signal_exit_code


@attrs.frozen
class Chunk:
    """One array submission: tasks ``offset .. offset+count-1`` of the run."""

    index: int
    offset: int
    count: int


ANY_TASK = -1  # key (job, ANY_TASK): the state of every task of ``job`` not listed on its own
CANCELLED_BEFORE_START = JobState(Status.CANCELLED, "cancelled before it started")  # one for 100,000 tasks


def task_ranges(ids: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted task ids as inclusive ranges: [0, 1, 2, 5] -> [(0, 2), (5, 5)]."""
    ranges: list[tuple[int, int]] = []
    for task in sorted(set(ids)):
        if ranges and task == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], task)
        else:
            ranges.append((task, task))
    return ranges


@attrs.frozen
class Outage:
    """Part of the scheduler did not answer a status query. ``active_known``: the states of
    queued and running jobs are still current (only accounting is down); else only the final
    states accounting gave are."""

    reason: str
    active_known: bool


class Scheduler:
    name = ""
    task_base = 0  # the scheduler's first array task id

    def submit_command(self, script: str, chunk: Chunk, max_parallel: int | None, dependency: str = "",
                       array: bool = True) -> str:
        """The submit command of one chunk; ``dependency``: ``after``'s or ``paired``'s options;
        ``array=False``: a gang, one job whose roles are rows ``offset..`` of tasks.bin."""
        raise NotImplementedError

    def waits_for(self, when: str) -> bool:
        """Whether the scheduler itself can hold a job for a dependency with ``when``."""
        return False

    def after(self, deps: Sequence[tuple[str, int, str]]) -> str:
        """The dependency on each ``(job id, array task, when)``."""
        raise NotImplementedError

    def paired(self, job_id: str, when: str) -> str | None:
        """The dependency of an array whose task i waits for task i of array ``job_id``, if the
        scheduler has one for ``when``."""
        return None

    def parse_job_id(self, out: str) -> str:
        raise NotImplementedError

    def find_by_name_command(self, name: str) -> str:
        """Prints the job id of a job already submitted under ``name`` (after a lost reply)."""
        raise NotImplementedError

    def query_command(self, job_ids: Sequence[str], gangs: Sequence[str] = ()) -> str:
        """Shell printing the state of ``job_ids``, and of each role of the ``gangs`` among them."""
        raise NotImplementedError

    def parse_states(self, out: str) -> dict[tuple[str, int], JobState]:
        raise NotImplementedError

    def outage(self, out: str) -> Outage | None:
        """What of the scheduler did not answer the query in ``out`` (None: all of it did)."""
        return None

    def cancel_command(self, tasks: dict[str, list[int]]) -> str:
        """Shell text cancelling these tasks of these array jobs, as task ranges: its length
        grows with the number of gaps, not of tasks."""
        raise NotImplementedError

    def check_command(self) -> str:
        raise NotImplementedError


# -- Slurm -----------------------------------------------------------------------------------

_SLURM_ACTIVE = {
    "PENDING": Status.PENDING, "REQUEUED": Status.PENDING, "REQUEUE_HOLD": Status.PENDING,
    "REQUEUE_FED": Status.PENDING, "RESV_DEL_HOLD": Status.PENDING, "CONFIGURING": Status.PENDING,
    "RUNNING": Status.RUNNING, "COMPLETING": Status.RUNNING, "SUSPENDED": Status.RUNNING,
    "STOPPED": Status.RUNNING, "SIGNALING": Status.RUNNING, "STAGE_OUT": Status.RUNNING,
    "RESIZING": Status.RUNNING,
}
_SLURM_FAILED = {
    "FAILED": "", "TIMEOUT": "time limit exceeded", "OUT_OF_MEMORY": "out of memory",
    "NODE_FAIL": "node failure", "BOOT_FAIL": "node boot failure", "DEADLINE": "deadline reached",
    "PREEMPTED": "preempted", "REVOKED": "revoked", "SPECIAL_EXIT": "special exit",
}
# Each failed state's failure class (xcore.plugin.FAILURE_CLASSES).
_SLURM_CLASS = {
    "PREEMPTED": "preempted", "NODE_FAIL": "node_failure", "BOOT_FAIL": "node_failure", "TIMEOUT": "timeout",
    "DEADLINE": "timeout", "OUT_OF_MEMORY": "out_of_memory",
}
# A run that ended in one of these was put back in the queue: the task runs again.
_SLURM_REQUEUED = {"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"}
# How a run ends when Slurm queues the task again: requeued (by a user, the job script or
# RequeueExit), preempted or its node failed under requeue, its node did not boot.
_SLURM_RERUNS = _SLURM_REQUEUED | {"PREEMPTED", "NODE_FAIL", "BOOT_FAIL"}
# Exit codes of the job script itself (module load, task record missing, working or checkpoint
# directory): the program never started. Not 99: Grid Engine reschedules a job that exits 99.
SCRIPT_EXIT_CODES = (96, 97, 98)
_SQUEUE_MARK = "@@XHPC-SACCT"
_FAILED_MARK = "@@XHPC-QUERY-FAILED"
# What squeue and sacct print when slurmctld or slurmdbd does not answer (an unknown job id,
# the other reason squeue fails, is an answer).
_NO_ANSWER = ("Unable to contact slurm controller", "Socket timed out", "Connection refused",
              "Connection timed out", "Problem talking to the database", "slurmdbd")
_STEPS_MARK = "@@XHPC-STEPS"
ROLE = "/role"  # parse_states key (job + ROLE, row): how one role of a gang (an srun step) ended


def _epoch(text: str) -> float | None:
    text = text.strip()
    if not text or text in ("Unknown", "None", "N/A"):
        return None
    if text.isdigit():
        value = float(text)
        return value if value > 0 else None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


# One (frozen) state per pending message, the same object from one poll to the next: a held
# sweep is thousands of tasks, and a watcher skips a job whose backend returned the very
# state object it applied last time (xcore.runtime.tracking.Applied), even when the cluster's
# answer changed elsewhere.
_PENDING_BY_MESSAGE: dict[str, JobState] = {}


def _pending(message: str) -> JobState:
    """The one pending state with this message."""
    shared = _PENDING_BY_MESSAGE.get(message)
    if shared is None:
        if len(_PENDING_BY_MESSAGE) > 1000:  # Slurm's reason codes and Grid Engine's holds: only a guard
            _PENDING_BY_MESSAGE.clear()
        shared = _PENDING_BY_MESSAGE[message] = JobState(Status.PENDING, message)
    return shared


def _expand_tasks(spec: str) -> list[int]:
    """``3`` / ``[0-4,7,9-11%2]`` / ``1-1000:1`` into task ids."""
    spec = spec.strip().strip("[]").split("%")[0]
    ids: list[int] = []
    for part in spec.split(","):
        if not part:
            continue
        step = 1
        if ":" in part:
            part, step_text = part.split(":", 1)
            step = int(step_text or 1)
        if "-" in part:
            lo, hi = part.split("-", 1)
            ids.extend(range(int(lo), int(hi) + 1, step))
        else:
            ids.append(int(part))
    return ids


def as_attempt(number: int, state: JobState) -> Attempt:
    return Attempt(number=number, status=state.status, failure=state.failure, exit_code=state.exit_code,
                   started_at=state.started_at, ended_at=state.ended_at, message=state.message)


def _with_attempts(current: JobState | None, ended: list[tuple[str, JobState]]) -> JobState:
    """A task's state from the runs accounting has closed (oldest first) and, when the
    scheduler queues or runs it again, its live state: every closed run before the live one
    (or before the last) is an earlier attempt."""
    last_state, last = ended[-1]
    # squeue and sacct run side by side, so squeue may list the task PENDING from just before
    # it started while sacct already has that same run ended (a task of a second). Pending
    # again after an ended run only when that run ended in a way Slurm requeues.
    pending_again = current is not None and current.status is Status.PENDING and last_state in _SLURM_RERUNS
    if current is not None and current.status.is_active and (
            pending_again or (current.status is Status.RUNNING and (
                None in (current.started_at, last.started_at)
                or current.started_at > last.started_at))):  # type: ignore[operator]
        previous = [state for _, state in ended]  # a new run (squeue's COMPLETING is the last one ending)
    elif ended[-1][0] in _SLURM_REQUEUED:  # requeued, not yet back in the queue's listing
        previous, current = [state for _, state in ended], JobState(Status.PENDING, "pending: requeued")
    else:
        previous, current = [state for _, state in ended[:-1]], ended[-1][1]
    if not previous:
        return current
    return attrs.evolve(current, attempt=len(previous) + 1,
                        previous_attempts=tuple(as_attempt(i + 1, state) for i, state in enumerate(previous)))


class SlurmScheduler(Scheduler):
    name = "slurm"
    task_base = 0

    def submit_command(self, script: str, chunk: Chunk, max_parallel: int | None, dependency: str = "",
                       array: bool = True) -> str:
        limit = f"%{max_parallel}" if max_parallel else ""
        # A dependency that can never be satisfied (it failed, was cancelled) cancels the job
        # instead of leaving it PENDING forever.
        after = f" --dependency={shlex.quote(dependency)} --kill-on-invalid-dep=yes" if dependency else ""
        if not array:  # a gang: one job whose roles are rows offset.. of tasks.bin
            return f"sbatch --parsable{after} {shlex.quote(script)} {chunk.offset}"
        return f"sbatch --parsable --array=0-{chunk.count - 1}{limit}{after} {shlex.quote(script)} {chunk.offset}"

    def waits_for(self, when: str) -> bool:
        return True  # afterok and afterany

    def after(self, deps: Sequence[tuple[str, int, str]]) -> str:
        """Every ``(job id, task, when)`` must be satisfied (commas: all of them)."""
        return ",".join(f"{'afterok' if when == 'success' else 'afterany'}:{job}_{task}" for job, task, when in deps)

    def paired(self, job_id: str, when: str) -> str | None:
        """Task i waits for task i of array ``job_id`` (only on success: Slurm has no afterany pairing)."""
        return f"aftercorr:{job_id}" if when == "success" else None

    def parse_job_id(self, out: str) -> str:
        match = re.search(r"^(\d+)", out.strip().splitlines()[-1] if out.strip() else "")
        if not match:
            raise ValueError(f"sbatch printed no job id: {out.strip()!r}")
        return match.group(1)

    def find_by_name_command(self, name: str) -> str:
        return f"squeue -h -r --name={shlex.quote(name)} -o %F | head -n 1"

    def query_command(self, job_ids: Sequence[str], gangs: Sequence[str] = ()) -> str:
        ids = ",".join(job_ids)
        # A gang's roles are steps named xhpc-role-<row> (scripts.launcher_script): one more sacct.
        steps = (f"; echo {_STEPS_MARK}; sacct -n -P -j {','.join(gangs)} -o JobID,State,ExitCode,Start,End,JobName "
                 "2>/dev/null | grep '|xhpc-role-'") if gangs else ""
        # squeue and sacct run side by side (a status poll waits for the slower, not the sum);
        # squeue's output goes through a private temporary file, sacct's straight out.
        # --duplicates: one record per run of a requeued task (its attempts), oldest first.
        # squeue without -r lists an array's pending tasks as one line, their ids as ranges
        # (a held 1,000-task sweep is one line, not 1,000); SLURM_BITSTR_LEN=0 prints those
        # ranges whole (the default cuts them at 64 characters with "...").
        return (
            "export SLURM_TIME_FORMAT=%s SLURM_BITSTR_LEN=0; umask 077; "
            'xhpc_sq=$(mktemp "${TMPDIR:-/tmp}/xhpc-squeue.XXXXXX") || exit 1; '
            f"{{ squeue -h -t all -j {ids} -o '%F|%K|%T|%r|%S|%A|%N' >\"$xhpc_sq\" 2>\"$xhpc_sq.err\" || "
            f"echo \"{_FAILED_MARK} squeue $(head -c 300 \"$xhpc_sq.err\" | tr '\\n' ' ')\" >>\"$xhpc_sq\"; }} & "
            f"xhpc_sacct=$(sacct -n -X -P --duplicates -j {ids} "
            "-o JobID,State,ExitCode,Start,End,JobIDRaw,NodeList 2>&1) || "
            f"xhpc_sacct=\"{_FAILED_MARK} sacct $(printf '%s' \"$xhpc_sacct\" | head -c 300 | tr '\\n' ' ')\"; "
            f"wait; cat \"$xhpc_sq\"; rm -f \"$xhpc_sq\" \"$xhpc_sq.err\"; echo {_SQUEUE_MARK}; "
            f"printf '%s\\n' \"$xhpc_sacct\""
            + steps
        )

    def outage(self, out: str) -> Outage | None:
        down = {}
        for line in out.splitlines():
            if line.startswith(_FAILED_MARK) and any(phrase in line for phrase in _NO_ANSWER):
                command, _, error = line[len(_FAILED_MARK) + 1:].partition(" ")
                down[command] = error.strip()
        if "squeue" in down:
            return Outage(f"Slurm's controller (slurmctld) is not answering: {down['squeue']}", active_known=False)
        if "sacct" in down:
            return Outage(f"Slurm's accounting (slurmdbd) is not answering: {down['sacct']}", active_known=True)
        return None

    def parse_states(self, out: str) -> dict[tuple[str, int], JobState]:
        out, _, steps_text = out.partition(_STEPS_MARK)
        squeue_text, _, sacct_text = out.partition(_SQUEUE_MARK)
        states: dict[tuple[str, int], JobState] = {}
        for line in steps_text.splitlines():  # a gang's role: key (job + ROLE, row)
            parts = line.strip().split("|")
            if len(parts) < 6 or not parts[5].startswith("xhpc-role-") or not parts[5][10:].isdigit():
                continue
            final = self._final(parts[1].split()[0], parts[1], parts[2], _epoch(parts[3]), _epoch(parts[4]))
            if final is not None:
                states[(parts[0].split(".")[0] + ROLE, int(parts[5][10:]))] = final
        runs: dict[tuple[str, int], list[tuple[str, JobState]]] = defaultdict(list)  # ended runs, oldest first
        finished_in_squeue: dict[tuple[str, int], tuple[str, bool]] = {}  # state, whether it ever started
        # squeue answered (an unknown job id is an answer: every id queried left its listing).
        squeue_answered = all(not line.startswith(_FAILED_MARK) or "Invalid job id" in line
                              for line in squeue_text.splitlines())
        by_raw_id: dict[str, list[tuple[str, int]]] = defaultdict(list)  # squeue's own job id -> tasks
        raw_of: dict[tuple[str, int], str] = {}  # and back
        alive: set[tuple[str, int]] = set()  # tasks squeue lists queued or running
        queued_arrays: set[str] = set()  # arrays squeue lists with the tasks still in their own record
        for line in squeue_text.splitlines():
            parts = line.strip().split("|")
            if len(parts) < 5 or not parts[0].isdigit():
                continue
            job, task_text, state, reason, start = parts[:5]
            # A task a line once it started; the tasks still pending in the array's own record
            # as ranges ("0-2,5,9-999%10"). No task id: an array whose tasks all ended together
            # (e.g. all cancelled while pending).
            if task_text.isdigit():
                tasks: Sequence[int] = (int(task_text),)
            else:
                tasks = _expand_tasks(task_text) if task_text not in ("N/A", "") else (ANY_TASK,)
            status = _SLURM_ACTIVE.get(state.split()[0])
            if status is Status.PENDING:
                waiting = _pending(f"pending: {reason if reason and reason != 'None' else 'queued'}")
                if tasks and tasks[0] != ANY_TASK and len(parts) > 5 and parts[5] == job:
                    queued_arrays.add(job)  # the array's own record: the tasks not started yet
            for task in tasks:
                if len(parts) > 5:
                    by_raw_id[parts[5]].append((job, task))
                    raw_of[(job, task)] = parts[5]
                if status is not None:
                    alive.add((job, task))
                if status is Status.PENDING:
                    states[(job, task)] = waiting
                elif status is Status.RUNNING:
                    states[(job, task)] = JobState(Status.RUNNING, state.lower(), started_at=_epoch(start))
                else:  # ran: it had a node (a task cancelled while pending has none, though Slurm gives it a start)
                    ran = parts[6].strip() != "" if len(parts) > 6 else _epoch(start) is not None
                    finished_in_squeue[(job, task)] = (state, ran)
        records = [line.strip().split("|") for line in sacct_text.splitlines()]
        own = {(job, int(task)) for job, _, task in (parts[0].partition("_") for parts in records if len(parts) >= 5)
               if task.isdigit()}  # tasks with a record of their own
        for parts in records:
            if len(parts) < 5:
                continue
            job_text, state_text, exit_text, start, end = parts[:5]
            raw = parts[5] if len(parts) > 5 else ""
            ran = len(parts) <= 6 or parts[6] not in ("None assigned", "")
            job, _, task_text = job_text.partition("_")
            if not job.isdigit():
                continue
            if task_text.isdigit():
                keys = [(job, int(task_text))]
            elif task_text:
                # A range: the array's own record, of the tasks never split off it. A task with
                # a record of its own, or that squeue lists under another job id, was split off:
                # Slurm 22.05 may keep the range on the array's record after the split and end it
                # with the one task left (an aftercorr array whose task 1 was cancelled for its
                # failed dependency reads "_[0-1] CANCELLED" for good, beside task 0's COMPLETED).
                keys = [key for key in ((job, task) for task in _expand_tasks(task_text))
                        if key not in own and raw_of.get(key, raw) == raw]
            elif not squeue_answered:
                continue  # which task(s) it is, only squeue says: read it linked next time
            else:
                # No "_task": accounting has not linked a task's record to its array yet (about
                # a second after it ends), or the array ended as a whole. squeue's own job id
                # says which task(s) the record is; without it, it stands for the whole array.
                # Not a task squeue lists alive: its listing may predate the record (an array
                # split its tasks off while sacct ran; the task it names now is another).
                keys = [key for key in by_raw_id.get(raw) or [(job, ANY_TASK)]
                        if key not in states or not states[key].status.is_active]
            state = state_text.split()[0]
            final = self._final(state, state_text, exit_text, _epoch(start) if ran else None, _epoch(end))
            for key in keys:
                if final is not None:
                    if task_text or key not in runs:
                        runs[key].append((state, final))
                elif key not in states:
                    status = _SLURM_ACTIVE.get(state, Status.PENDING)
                    states[key] = JobState(status, "pending: queued" if status is Status.PENDING else state.lower())
        for key, ended in runs.items():
            if key in alive:
                # squeue lists the task queued or running, so no run of it ended unstarted in
                # a way Slurm never queues again. Such a record is a cancel newer than squeue's
                # listing (read next poll) or another task's.
                ended = [run for run in ended if run[0] in _SLURM_RERUNS or run[1].started_at is not None]
                if not ended:
                    continue
            states[key] = _with_attempts(states.get(key), ended)
        for key, (state, started) in finished_in_squeue.items():
            if key not in states or not states[key].status.is_terminal:
                # Finished, but accounting has not caught up yet: report it once sacct has the exit code.
                # A task that never started (cancelled while pending) reads PENDING meanwhile: RUNNING
                # would give it a start time it never had (and hide why it was cancelled).
                finishing = JobState(Status.RUNNING if started else Status.PENDING, f"finishing ({state.lower()})")
                known = states.get(key)
                states[key] = finishing if known is None else attrs.evolve(
                    finishing, attempt=known.attempt, previous_attempts=known.previous_attempts)
        if squeue_answered:
            # A pending task leaves its array's own record only to start (a line and a record of
            # its own) or when it is cancelled: `scancel <id>_<task>` of a pending task drops it
            # from squeue and sacct alike. So a task of an array squeue lists queued, with no line
            # or record of its own, was cancelled before it started (by xcore or outside it).
            for job in queued_arrays:
                states.setdefault((job, ANY_TASK), CANCELLED_BEFORE_START)
        return states

    @staticmethod
    def _final(state: str, state_text: str, exit_text: str, start: float | None, end: float | None) -> JobState | None:
        if start is not None and end is not None and start > end:
            start = None  # a planned start that never happened (cancelled while pending)
        code_text, _, signal_text = exit_text.partition(":")
        code = int(code_text) if code_text.isdigit() else None
        sig = int(signal_text) if signal_text.isdigit() else 0
        if state == "COMPLETED":
            return JobState(Status.COMPLETED, "exit code 0", code if code is not None else 0, start, end)
        if state == "CANCELLED":
            return JobState(Status.CANCELLED, state_text.lower(), None, start, end)
        if state in _SLURM_REQUEUED:  # a run that the scheduler (or an operator) put back in the queue
            return JobState(Status.FAILED, "requeued", None, start, end, failure="preempted")
        if state in _SLURM_FAILED:
            reason = _SLURM_FAILED[state]
            if not reason:  # ExitCode is "code:signal"; the one convention words either
                reason = (describe_exit(code, signalled=False) if code
                          else describe_exit(signal_exit_code(sig), signalled=True) if sig else "failed")
            exit_code = code if code else (signal_exit_code(sig) if sig else code)
            failure = _SLURM_CLASS.get(state) or ("launch" if exit_code in SCRIPT_EXIT_CODES else "error")
            return JobState(Status.FAILED, reason, exit_code, start, end, failure=failure)
        return None

    def cancel_command(self, tasks: dict[str, list[int]]) -> str:
        targets = []
        for job, ids in sorted(tasks.items()):
            if ANY_TASK in ids:  # not an array (a gang): the whole job
                targets.append(job)
                continue
            spans = [str(a) if a == b else f"{a}-{b}" for a, b in task_ranges(ids)]
            for i in range(0, len(spans), 500):  # one argument stays far below the 128 KiB cap
                targets.append(f"{job}_[{','.join(spans[i:i + 500])}]")
        return "\n".join("scancel " + " ".join(targets[i:i + 100]) for i in range(0, len(targets), 100))

    def check_command(self) -> str:
        return "sinfo -h -o '%P %a %D %T' && sbatch --version"


# -- Grid Engine -----------------------------------------------------------------------------

_WHY_MARK = "@@XHPC-WHY"
_QACCT_MARK = "@@XHPC-QACCT"
# qacct's "failed" for a run ended by rescheduling (qmod -rj, a host gone), and the codes of
# failures before the job script ran (setup, output file, shell, working directory).
_RESCHEDULED = 25
_BEFORE_START = frozenset(range(1, 25)) | {26, 27, 28, 29}


def _failed_code(record: dict[str, str]) -> int:
    words = record.get("failed", "0").split()
    return int(words[0]) if words and words[0].isdigit() else 0


class GridEngineScheduler(Scheduler):
    name = "sge"
    task_base = 1

    def submit_command(self, script: str, chunk: Chunk, max_parallel: int | None, dependency: str = "",
                       array: bool = True) -> str:
        limit = f" -tc {max_parallel}" if max_parallel else ""
        after = f" {dependency}" if dependency else ""
        return f"qsub -terse -t 1-{chunk.count}{limit}{after} {shlex.quote(script)} {chunk.offset}"

    def waits_for(self, when: str) -> bool:
        return when == "finished"  # -hold_jid waits for the end, whatever the exit status

    def after(self, deps: Sequence[tuple[str, int, str]]) -> str:
        """Grid Engine holds for whole jobs: an array dependency waits for all its tasks."""
        return "-hold_jid " + ",".join(dict.fromkeys(job for job, _, _ in deps))

    def paired(self, job_id: str, when: str) -> str | None:
        return f"-hold_jid_ad {job_id}" if when == "finished" else None

    def parse_job_id(self, out: str) -> str:
        match = re.search(r"^(\d+)", out.strip().splitlines()[-1] if out.strip() else "")
        if not match:
            raise ValueError(f"qsub printed no job id: {out.strip()!r}")
        return match.group(1)

    def find_by_name_command(self, name: str) -> str:
        return f"qstat -j {shlex.quote(name)} 2>/dev/null | awk '/^job_number:/ {{print $2; exit}}'"

    def query_command(self, job_ids: Sequence[str], gangs: Sequence[str] = ()) -> str:
        # qacct only for array jobs that have tasks no longer in qstat (usually one call); then
        # one qstat -j for the jobs still queued, whose scheduling info says why they wait.
        # Without -g d, qstat lists the tasks still queued as ranges (1-75000:1) and only the
        # started ones one by one: a held 100,000-task sweep is a few lines, not 60 MB of XML.
        ids = " ".join(job_ids)
        return (
            "out=$(qstat -xml -u '*' 2>&1); echo \"$out\"; "
            f"echo {_QACCT_MARK}; live=; "
            f"for j in {ids}; do "
            "  n=$(printf '%s' \"$out\" | grep -c \"<JB_job_number>$j</JB_job_number>\"); "
            "  echo \"@@XHPC-JOB $j $n\"; "
            "  qacct -j $j 2>/dev/null "
            "| grep -E '^(jobnumber|taskid|failed|exit_status|start_time|end_time|category) ' ; "
            "  [ \"$n\" -gt 0 ] && live=\"$live${live:+,}$j\"; "
            "done; "
            # why the waiting ones wait: ONE qstat -j for all of them, its scheduling info only
            "if [ -n \"$live\" ] && printf '%s' \"$out\" | grep -q '<state>[^<]*[qh][^<]*</state>'; then "
            f"  echo {_WHY_MARK}; qstat -j \"$live\" 2>/dev/null "
            "| grep -E '^(job_number|scheduling info):|^[[:space:]]{8,}[^[:space:]]'; "
            "fi"
        )

    def parse_states(self, out: str) -> dict[tuple[str, int], JobState]:
        qstat_text, _, qacct_text = out.partition(_QACCT_MARK)
        qacct_text, _, why_text = qacct_text.partition(_WHY_MARK)
        why = scheduling_info(why_text)
        states: dict[tuple[str, int], JobState] = {}
        start = qstat_text.find("<?xml")
        if start >= 0:
            import xml.etree.ElementTree as ET  # only Grid Engine's status needs it (a Slurm poll imports less)

            try:
                root = ET.fromstring(qstat_text[start:])
            except ET.ParseError:
                root = None
            if root is not None:
                for job in root.iter("job_list"):
                    number = (job.findtext("JB_job_number") or "").strip()
                    state = (job.findtext("state") or "").strip()
                    tasks_text = (job.findtext("tasks") or "").strip()
                    started = job.findtext("JAT_start_time")
                    tasks = _expand_tasks(tasks_text) if tasks_text else [1]
                    active = self._active(state, started, why.get(number, ""))  # one for a range of queued tasks
                    for task in tasks:
                        states[(number, task)] = active
        record: dict[str, str] = {}
        runs: dict[tuple[str, int], list[tuple[bool, JobState]]] = defaultdict(list)  # (rescheduled, state)

        def flush() -> None:
            if "jobnumber" in record and "taskid" in record:
                task = int(record["taskid"]) if record["taskid"].isdigit() else 1
                runs[(record["jobnumber"], task)].append((_failed_code(record) == _RESCHEDULED, self._final(record)))
            record.clear()

        for line in qacct_text.splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "jobnumber":
                flush()
            if key in ("jobnumber", "taskid", "failed", "exit_status", "start_time", "end_time", "category"):
                record[key] = value.strip()
        flush()
        for task_key, ended in runs.items():
            live = states.get(task_key)
            if ended[-1][0]:  # rescheduled: every run accounting closed is an earlier attempt
                previous = [state for _, state in ended]
                current = live if live is not None else JobState(Status.PENDING, "pending: rescheduled")
            elif live is None or live.status is Status.PENDING:
                previous, current = [state for _, state in ended[:-1]], ended[-1][1]
            else:  # qstat still lists the run that just ended: its final state comes next poll
                previous, current = [state for _, state in ended[:-1]], live
            states[task_key] = current if not previous else attrs.evolve(
                current, attempt=len(previous) + 1,
                previous_attempts=tuple(as_attempt(i + 1, state) for i, state in enumerate(previous)))
        return states

    @staticmethod
    def _active(state: str, started: str | None, why: str = "") -> JobState:
        when = None
        if started:
            try:
                when = datetime.fromisoformat(started.strip()).timestamp()
            except ValueError:
                when = None
        if "E" in state:
            return _pending(f"pending: error state {state} (see qstat -j)")
        if "h" in state:
            return _pending(f"pending: held ({why})" if why else "pending: on hold")
        if "d" in state:
            return JobState(Status.RUNNING, "being deleted", started_at=when)
        if "r" in state or "t" in state or "s" in state.lower():
            return JobState(Status.RUNNING, "running" if "r" in state else state, started_at=when)
        return _pending(f"pending: {why}" if why else "pending: queued")

    @staticmethod
    def _final(record: dict[str, str]) -> JobState:
        def when(text: str | None) -> float | None:
            if not text or text.startswith("-/-"):
                return None
            try:
                return time.mktime(time.strptime(text.strip(), "%a %b %d %H:%M:%S %Y"))
            except ValueError:
                return None

        failed = record.get("failed", "0").strip()
        failed_code = _failed_code(record)
        exit_text = record.get("exit_status", "").split()[0] if record.get("exit_status", "").split() else ""
        code = int(exit_text) if exit_text.isdigit() else None
        start, end = when(record.get("start_time")), when(record.get("end_time"))
        if failed_code == 0 and code == 0:
            return JobState(Status.COMPLETED, "exit code 0", 0, start, end)
        category = record.get("category", "")
        limit = re.search(r"h_rt=(\d+)", category)
        if code == 137 and limit and start is not None and end is not None and end - start >= int(limit.group(1)) - 1:
            # Killed at its h_rt, whichever daemon enforced it (qmaster reports failed 37, execd may not).
            return JobState(Status.FAILED, f"time limit exceeded (h_rt={limit.group(1)} s)", code, start, end,
                            failure="timeout")
        if failed_code == 0:  # > 128: a signal; the job script's own codes: the program never started
            return JobState(Status.FAILED, describe_exit(code), code, start, end,
                            failure="launch" if code in SCRIPT_EXIT_CODES else "error")
        reason = failed.split(":", 1)[1].strip() if ":" in failed else failed
        if failed_code == _RESCHEDULED:  # qmod -rj, or its host went away: the task runs again
            return JobState(Status.FAILED, "rescheduled", code, start, end, failure="preempted")
        if failed_code == 37:  # qmaster enforced h_rt, h_cpu or h_vmem
            memory = "h_vmem" in category and not limit
            return JobState(Status.FAILED, f"{'memory' if memory else 'time'} limit exceeded ({reason})", code,
                            start, end, failure="out_of_memory" if memory else "timeout")
        if failed_code == 100 and code is not None and code > 128:  # killed after start (qdel, signal)
            return JobState(Status.FAILED, describe_exit(code, signalled=True), code, start, end, failure="error")
        return JobState(Status.FAILED, f"failed {failed_code}: {reason}" + (f", exit code {code}" if code else ""),
                        code, start, end, failure="launch" if failed_code in _BEFORE_START else "error")

    def cancel_command(self, tasks: dict[str, list[int]]) -> str:
        targets = [f"{job} -t {a}-{b}" for job, ids in sorted(tasks.items()) for a, b in task_ranges(ids)]
        return "\n".join("qdel " + " ".join(targets[i:i + 100]) for i in range(0, len(targets), 100))

    def check_command(self) -> str:
        return "qstat -g c && qconf -sql"


def scheduling_info(text: str, limit: int = 3) -> dict[str, str]:
    """Why each job waits, from ``qstat -j``'s ``scheduling info`` (the scheduler's own words,
    ``schedd_job_info true`` in its configuration): job number -> its first ``limit`` reasons."""
    reasons: dict[str, list[str]] = {}
    job = ""
    inside = False
    for line in text.splitlines():
        if line.startswith("job_number:"):
            job, inside = line.split(":", 1)[1].strip(), False
        elif line.startswith("scheduling info:"):
            inside = True
            reasons.setdefault(job, []).append(line.split(":", 1)[1].strip())
        elif inside and line[:1].isspace() and line.strip():
            reasons.setdefault(job, []).append(line.strip())
        else:
            inside = False
    return {job: "; ".join(dict.fromkeys(r for r in found if r))[:300] if len(found) <= limit
            else "; ".join(list(dict.fromkeys(found))[:limit]) + f" (+{len(found) - limit} more)"
            for job, found in reasons.items() if job}


SCHEDULERS: dict[str, Scheduler] = {"slurm": SlurmScheduler(), "sge": GridEngineScheduler()}
