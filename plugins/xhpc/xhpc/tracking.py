"""Status, cancellation and logs of cluster jobs, from the launcher or any later process.

Handles are grouped by cluster; each cluster gets ONE remote command that runs the
scheduler's query (two scheduler calls at most for one array job) and returns everything.
"""

from __future__ import annotations

import shlex
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence

import attrs

from xcore.plugin import (
    BackendUnavailableError,
    JobState,
    Status,
    XcoreError,
    describe_exit,
    follow_bytes,
    lost_state,
)
from xhpc import answers, config
from xhpc.handles import ClusterHandle, GridEngineHandle
from xhpc.schedulers import ANY_TASK, CANCELLED_BEFORE_START, ROLE, SCHEDULERS, Outage, task_ranges
from xhpc.transport import ClusterConnectionError, Transport, connect

LOST_REPLY_GRACE = 120.0  # seconds to wait for a chunk-K.id after a lost submission reply
_MARK_CHUNK = "@@XHPC-CHUNKID"
_MARK_CANCELLED = "@@XHPC-CANCELLED"
_MARK_REQUEUED = "@@XHPC-REQUEUED"
_MARK_REFUSED = "@@XHPC-REFUSED"


def _scheduler_name(handle: ClusterHandle) -> str:
    return "sge" if isinstance(handle, GridEngineHandle) else "slurm"


def _transport(handle: ClusterHandle) -> Transport:
    return connect(config.find(handle.cluster, _scheduler_name(handle), handle.local))


def states(handles: Sequence[ClusterHandle]) -> list[JobState]:
    last = answers.last_poll(handles)  # these very handles polled before: grouped as then
    if last is not None:
        failed, grouped = last.failed, last.grouped
    else:
        failed, groups = {}, defaultdict(list)
        for i, handle in enumerate(handles):
            if handle.error:
                failed[i] = JobState(Status.FAILED, handle.error, failure="launch")
            else:
                groups[(handle.cluster, handle.local, _scheduler_name(handle))].append(i)
        grouped = {key: (indices, [handles[i] for i in indices]) for key, indices in groups.items()}
    result: list[JobState | None] = [None] * len(handles)
    for i, launch_failed in failed.items():
        result[i] = launch_failed
    answered: dict[tuple[str, bool, str], list[JobState | None]] = {}
    out_of_reach: list[str] = []
    for (_cluster, _local, scheduler_name), (indices, group) in grouped.items():
        found: list[JobState | None]
        try:
            found, outage = _query_asking_again(group, scheduler_name)
        except ClusterConnectionError as exc:
            if not exc.retryable:  # refused (auth, host key): asking again cannot help
                found = [JobState(Status.UNKNOWN, str(exc).split("\n")[0]) for _ in group]
            else:  # the link is down for now: no answer, so these jobs stay as recorded
                out_of_reach.append(str(exc).split("\n")[0])
                continue
        except XcoreError as exc:
            message = str(exc).split("\n")[0]
            found = [JobState(Status.UNKNOWN, message) for _ in group]
        else:
            if outage is not None:  # the jobs it cannot tell about stay as recorded (None)
                out_of_reach.append(f"cluster {group[0].cluster!r}: {outage}")
        answered[(_cluster, _local, scheduler_name)] = found
        if last is not None and found is last.answered.get((_cluster, _local, scheduler_name)):
            continue  # the cluster's last answer again (see below)
        for i, state in zip(indices, found, strict=True):
            result[i] = state
    reused = [key for key in answered if last is not None and answered[key] is last.answered.get(key)]
    if out_of_reach:  # what the reachable clusters said, None for the others
        for key in reused:
            for i, state in zip(grouped[key][0], answered[key], strict=True):
                result[i] = state
        raise BackendUnavailableError("; ".join(out_of_reach), states=list(result))
    if last is not None:
        if len(reused) == len(grouped):
            return list(last.result)  # every cluster answered as last time: not one state moved
        for key in reused:
            for i in grouped[key][0]:
                result[i] = last.result[i]
    final = [r if r is not None else JobState(Status.UNKNOWN, "no state") for r in result]
    answers.remember_poll(handles, failed, grouped, answered, final)
    return final


def _query_asking_again(group: list[ClusterHandle],
                        scheduler_name: str) -> tuple[list[JobState | None], str | None]:
    """A status query only reads, so a connection that dropped under it (the shared SSH
    connection closed by another process, a network blip) is asked once more before its
    jobs read UNKNOWN: a wait treats UNKNOWN as final."""
    try:
        return _query(group, scheduler_name)
    except ClusterConnectionError as exc:
        if not exc.retryable:
            raise
        return _query(group, scheduler_name)


def _query(group: list[ClusterHandle], scheduler_name: str) -> tuple[list[JobState | None], str | None]:
    """Each job's state, and why some of the scheduler did not answer (their states None)."""
    scheduler = SCHEDULERS[scheduler_name]
    transport = _transport(group[0])
    q = shlex.quote
    asked = (group[0].cluster, group[0].local, scheduler_name)
    unresolved, known_ids, run_dirs, gangs = answers.about(asked, group, _about)
    lost_ids: dict[tuple[str, int], str] = {}
    lost_errors: dict[tuple[str, int], str] = {}
    if unresolved:
        # Rare: a submission whose reply was lost; its outcome is in chunk-K.id (or .err) on the cluster.
        read = "; ".join(
            f"d={q(run_dir)}/chunk-{chunk}; "
            f"if [ -s \"$d.id\" ]; then echo \"{_MARK_CHUNK} {i} ok $(tail -n 1 \"$d.id\")\"; "
            f"elif [ -e \"$d.err\" ]; then echo \"{_MARK_CHUNK} {i} error $(head -c 2000 \"$d.err\")\"; fi"
            for i, (run_dir, chunk) in enumerate(unresolved)
        )
        for line in transport.check(read, "Reading job ids").out.splitlines():
            fields = line.split(" ", 3)
            if not line.startswith(_MARK_CHUNK) or len(fields) < 3 or not fields[1].isdigit() \
                    or int(fields[1]) >= len(unresolved):
                continue
            key = unresolved[int(fields[1])]
            if fields[2] == "error":
                lost_errors[key] = fields[3].strip() if len(fields) > 3 else "the scheduler refused the job"
                continue
            try:
                lost_ids[key] = scheduler.parse_job_id(fields[3] if len(fields) > 3 else "")
            except ValueError:
                pass
    job_ids = sorted(set(known_ids) | set(lost_ids.values())) if lost_ids else known_ids
    table: dict[tuple[str, int], JobState] = {}
    outage: Outage | None = None
    cancelled: set[tuple[str, int]] = set()
    requeued: dict[tuple[str, int, int], tuple[str, int | None]] = {}  # (run_dir, index, attempt): why, exit code
    refused: dict[tuple[str, int, int], int] = {}  # (run_dir, index, attempt): max_attempts
    if job_ids:
        # Markers the job script and cancel leave: cancelled/INDEX, and requeued/INDEX.ATTEMPT
        # for a run the script requeued before its time limit (the scheduler records "requeued"),
        # refused/INDEX.ATTEMPT.MAX for a Grid Engine rescheduled run beyond max_attempts.
        markers = (
            "for d in " + " ".join(q(d) for d in run_dirs) + "; do "
            f"for f in \"$d\"/cancelled/*; do [ -e \"$f\" ] && echo \"{_MARK_CANCELLED} $d ${{f##*/}}\"; done; "
            f"for f in \"$d\"/requeued/*; do [ -e \"$f\" ] && echo \"{_MARK_REQUEUED} $d ${{f##*/}}\"; done; "
            f"for f in \"$d\"/refused/*; do [ -e \"$f\" ] && echo \"{_MARK_REFUSED} $d ${{f##*/}}\"; done; done; "
        )
        out = transport.run(markers + scheduler.query_command(job_ids, gangs)).out
        if not unresolved and (same := answers.recall(asked, out, group, time.time())) is not None:
            return same  # the same output about the same handles: the same states
        for line in out.splitlines():
            if line.startswith((_MARK_CANCELLED, _MARK_REQUEUED, _MARK_REFUSED)):
                mark, run_dir, name = line.split(" ", 2)
                if mark == _MARK_CANCELLED:
                    cancelled.update((run_dir, index) for index in _marked_indices(name))
                fields = name.split(".")  # INDEX.ATTEMPT.CLASS[.CODE]
                if mark == _MARK_REQUEUED and len(fields) >= 3 and fields[0].isdigit() and fields[1].isdigit():
                    code = int(fields[3]) if len(fields) > 3 and fields[3].isdigit() else None
                    requeued[(run_dir, int(fields[0]), int(fields[1]))] = (fields[2], code)
                if mark == _MARK_REFUSED and len(fields) == 3 and all(f.isdigit() for f in fields):
                    refused[(run_dir, int(fields[0]), int(fields[1]))] = int(fields[2])
        table = scheduler.parse_states(out)
        outage = scheduler.outage(out)
    now = time.time()
    until = float("inf")  # when a state read here would change with the clock alone
    states: list[JobState | None] = []
    for handle in group:
        job_id = handle.job_id or lost_ids.get((handle.run_dir, handle.chunk), "")
        if not job_id:
            error = lost_errors.get((handle.run_dir, handle.chunk))
            if error is not None:
                states.append(JobState(Status.FAILED, f"submission failed: {error}", failure="launch"))
            elif now - handle.submitted_at < LOST_REPLY_GRACE:
                states.append(JobState(Status.PENDING, "pending: confirming submission (the reply was lost)"))
            else:
                states.append(JobState(Status.FAILED, "submission not confirmed: the connection dropped before "
                                                      "the scheduler accepted the job", failure="launch"))
            continue
        state = table.get((job_id, handle.task)) or table.get((job_id, ANY_TASK))
        if handle.task == ANY_TASK:
            state = _role_state(state, table.get((job_id + ROLE, handle.index)))
        if outage is not None and (state is None or not (state.status.is_terminal or outage.active_known)):
            states.append(None)  # the part that knows this job did not answer: not lost, not pending
            continue
        marked = (handle.run_dir, handle.index) in cancelled
        if state is None and marked:
            # Slurm drops a pending array task cancelled on its own from squeue and sacct alike;
            # SGE keeps no accounting for a task deleted before it started.
            state = CANCELLED_BEFORE_START
        elif state is None:
            if now - handle.submitted_at < 60:
                state = JobState(Status.PENDING, "pending: submitted")
                until = min(until, handle.submitted_at + 60)
            else:  # the scheduler answered and has no record: the job is lost (not UNKNOWN)
                state = lost_state(f"{scheduler_name} job {job_id} task {handle.task} is no longer known "
                                   "to the scheduler or its accounting")
        if marked and state.status is Status.FAILED:
            state = JobState(Status.CANCELLED, "cancelled", state.exit_code, state.started_at, state.ended_at)
        states.append(_numbered(state, handle, requeued, refused))
    if job_ids and not unresolved:
        answers.remember(asked, out, group, states, outage.reason if outage is not None else None, until)
    return states, outage.reason if outage is not None else None


def _about(group: Sequence[ClusterHandle]) -> tuple[list[tuple[str, int]], list[str], list[str], list[str]]:
    """What a query of ``group`` names: submissions whose job id was lost (their run
    directory and chunk), the array job ids, the run directories, the gangs' job ids."""
    return (sorted({(h.run_dir, h.chunk) for h in group if not h.job_id}),
            sorted({h.job_id for h in group if h.job_id}), sorted({h.run_dir for h in group if h.run_dir}),
            sorted({h.job_id for h in group if h.job_id and h.task == ANY_TASK}))


def _role_state(gang: JobState | None, role: JobState | None) -> JobState | None:
    """One role of a gang: how its own step ended once it did (a learner may finish before its
    actors, a role that failed reads its own exit code), else the allocation's state. A step
    that was cancelled waits for the allocation to say why: the user cancelled the gang (it
    reads CANCELLED), or another role failed and the launcher stopped this one."""
    if role is None:
        return gang
    if role.status is not Status.CANCELLED:
        return role
    if gang is not None and gang.status is Status.FAILED:
        return JobState(Status.CANCELLED, "stopped: another job of its gang failed", role.exit_code,
                        role.started_at, role.ended_at)
    return gang


def _numbered(state: JobState, handle: ClusterHandle,
              requeued: dict[tuple[str, int, int], tuple[str, int | None]],
              refused: dict[tuple[str, int, int], int] | None = None) -> JobState:
    """The scheduler counts a task's runs from 1; the submission's first run is attempt
    ``handle.attempt``. A run the job script requeued says why in its marker: before its time
    limit (timeout) or a program failure the policy retries (error, with its exit code). A
    rescheduled run the script refused (max_attempts used up) ends with the class of the
    attempt before it: that failure is why the task stopped."""
    shift = handle.attempt - 1
    if not state.previous_attempts and not shift:
        return state
    previous = []
    for attempt in state.previous_attempts:
        number = attempt.number + shift
        why, code = requeued.get((handle.run_dir, handle.index, number), (None, None))
        if why == "timeout":
            attempt = attrs.evolve(attempt, failure="timeout", message="stopped before its time limit (requeued)")
        elif why == "error":
            attempt = attrs.evolve(attempt, failure="error", exit_code=code,
                                   message=f"{describe_exit(code) if code else 'failed'} (requeued)")
        previous.append(attrs.evolve(attempt, number=number))
    numbered = attrs.evolve(state, attempt=(state.attempt or 1) + shift, previous_attempts=tuple(previous))
    limit = (refused or {}).get((handle.run_dir, handle.index, numbered.attempt or 1))
    if limit is not None and state.status is Status.FAILED and previous:
        last = previous[-1]
        numbered = attrs.evolve(numbered, failure=last.failure, exit_code=last.exit_code,
                                message=f"attempt {numbered.attempt} refused: max_attempts={limit} used up "
                                        f"(attempt {last.number}: {last.message or last.failure})")
    return numbered


_BENIGN_CANCEL_ERRORS = ("already complet", "Invalid job id", "does not exist", "not found")


def cancel(handles: Sequence[ClusterHandle]) -> None:
    """One script per cluster, whatever the number of tasks: markers are fed to ``touch``
    through ``xargs`` and tasks are cancelled as ranges, so no command line grows with the
    sweep (thousands of task ids once overflowed the argument limit and SSH packets). A marker
    names a range of indices (``0-99999``): a 100,000-task sweep is one file, not 100,000 files
    to create now and to list at every status query after."""
    groups: dict[tuple[str, bool, str], list[ClusterHandle]] = defaultdict(list)
    for handle in handles:
        if handle.job_id:
            groups[(handle.cluster, handle.local, _scheduler_name(handle))].append(handle)
    for (_, _, scheduler_name), group in groups.items():
        scheduler = SCHEDULERS[scheduler_name]
        tasks: dict[str, list[int]] = defaultdict(list)
        indices: dict[str, list[int]] = defaultdict(list)
        for handle in group:
            tasks[handle.job_id].append(handle.task)
            if handle.run_dir:
                indices[handle.run_dir].append(handle.index)
        # Markers first (they tell a cancelled task from a failed one where the scheduler cannot).
        lines = ["xhpc_rc=0"]
        for run_dir, ids in indices.items():
            numbers = "\n".join(str(a) if a == b else f"{a}-{b}" for a, b in task_ranges(ids))
            lines.append(f"(cd {shlex.quote(run_dir)}/cancelled 2>/dev/null && xargs touch --) <<'XHPC_END'\n"
                         f"{numbers}\nXHPC_END")
        lines += [f"{line} || xhpc_rc=1" for line in scheduler.cancel_command(tasks).splitlines()]
        lines.append("exit $xhpc_rc")
        result = _transport(group[0]).run("\n".join(lines) + "\n")
        problems = [line for line in result.err.splitlines()
                    if line.strip() and not any(b in line for b in _BENIGN_CANCEL_ERRORS)]
        if result.returncode != 0 and problems:
            raise ClusterConnectionError(f"Cancelling on cluster {group[0].cluster!r} failed: {' '.join(problems)}")


def _marked_indices(name: str) -> range:
    """The indices a cancel marker names: ``INDEX`` or ``FIRST-LAST`` (nothing if malformed)."""
    first, dash, last = name.partition("-")
    last = last if dash else first
    if not first.isdigit() or not last.isdigit():
        return range(0)
    return range(int(first), int(last) + 1)


def logs(handle: ClusterHandle, follow: bool) -> Iterator[str]:
    """The task's log as text, decoded incrementally (a character split across two reads
    comes out whole); following ends once the task is terminal and its log was drained."""
    if handle.error:  # a handle stored by a version that returned failed submissions as handles
        yield f"xhpc: this job was never submitted: {handle.error}\n"
        return
    if not handle.log_path:
        return
    transport = _transport(handle)
    path = shlex.quote(handle.log_path)

    def read_from(offset: int) -> bytes:
        return bytes(transport.run(f"tail -c +{offset + 1} {path} 2>/dev/null; true").stdout)

    def finished() -> bool:
        try:
            status = states([handle])[0].status
        except BackendUnavailableError:  # the cluster or its scheduler is out of reach for now
            return False
        return status.is_terminal or status is Status.UNKNOWN

    yield from follow_bytes(read_from, follow=follow, finished=finished, poll_secs=FOLLOW_POLL_SECS,
                            sleep=lambda secs: time.sleep(secs))


FOLLOW_POLL_SECS = 1.0


def log_lines(handles: Sequence[ClusterHandle], marker: str) -> list[list[str] | None]:
    """The lines holding ``marker`` in each task's log: ONE remote ``grep`` per cluster, the
    log paths sent on standard input (reading the results of 2,500 ended tasks one ``ssh``
    each kept ``xcore ui`` busy for minutes). A cluster out of reach gives None for its tasks."""
    found: list[list[str] | None] = [[] for _ in handles]
    groups: dict[tuple[str, bool, str], list[int]] = defaultdict(list)
    for i, handle in enumerate(handles):
        if handle.log_path and not handle.error and "\n" not in handle.log_path:
            groups[(handle.cluster, handle.local, _scheduler_name(handle))].append(i)
    for indices in groups.values():
        separator = f"@@XHPC-LOG-{uuid.uuid4().hex}"  # no program output can forge it
        script = (f"i=0; while IFS= read -r p; do echo \"{separator} $i\"; "
                  f"grep -a -F -- {shlex.quote(marker)} \"$p\" 2>/dev/null; i=$((i+1)); done; true")
        paths = "".join(f"{handles[i].log_path}\n" for i in indices).encode()
        try:
            out = _transport(handles[indices[0]]).run(script, stdin=paths).out
        except (ClusterConnectionError, XcoreError):
            for i in indices:
                found[i] = None
            continue
        current: list[str] | None = None
        for line in out.splitlines():
            if line.startswith(separator + " "):
                number = line[len(separator) + 1:]
                current = found[indices[int(number)]] if number.isdigit() and int(number) < len(indices) else None
            elif current is not None:
                current.append(line)
    return found
