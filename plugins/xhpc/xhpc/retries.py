"""How a job's retry policy runs on the cluster, with the launcher long gone.

The scheduler retries by itself where it can: Slurm requeues a preempted task or one whose
node failed (``--requeue``; ``--no-requeue`` otherwise, so it never reruns a job silently),
Grid Engine reschedules a rerunnable one (``-r y``). A time limit is the job script's part:
the scheduler sends a warning signal (SIGUSR1) ``signal_before_limit`` seconds before the
limit, the script passes it to the program, gives it time to save a checkpoint, and puts the
task back in the queue (``scontrol requeue``; on Grid Engine exit 99, "reschedule me") while
attempts remain. So is a program failure the policy retries (``error``, ``exit_codes``).
The script counts attempts (``XCORE_ATTEMPT``) and creates the work unit's checkpoint
directory (``XCORE_CHECKPOINT_DIR``); on the last attempt it turns Slurm's requeue off, so a
job that used up ``max_attempts`` stays failed with its class. Grid Engine's ``-r y`` holds for
the whole array, so there the script refuses a rescheduled run beyond ``max_attempts`` instead.

``backoff_secs`` delays the next attempt of a requeue the script makes, without holding the
allocation: Slurm gets the task's new start time (``scontrol update StartTime=now+N``, pending
with reason BeginTime); Grid Engine cannot delay one task of an array (``qalter -a`` is for
whole jobs), so the script holds the task (``qhold``) and submits a tiny job that releases it
at that time (``qsub -a``).
"""

from __future__ import annotations

import math

import attrs

from xcore.plugin import LaunchError, Retry

DEFAULT_SIGNAL_BEFORE_LIMIT = 300
"""Seconds before the time limit the warning comes when the policy retries timeouts (at most
half the limit)."""

# Scheduler failure classes the scheduler itself retries (requeue / reschedule).
_NATIVE = ("preempted", "node_failure")
_MAX_BACKOFF_MS = 2**32  # ~50 days: the script's doubling (at most 2**20) stays within bash's integers
REFUSED_EXIT = 95
"""The Grid Engine job script's exit code for a rescheduled run beyond ``max_attempts``."""


@attrs.frozen
class Plan:
    """What the submission and job script do for one policy."""

    requeue: bool = False  # the scheduler runs the task again after preemption or node failure
    on_limit: bool = False  # the job script requeues the task at the time-limit warning
    max_attempts: int = 1
    warn_secs: int | None = None  # seconds before the limit the warning signal comes
    # the program's exit codes on which the job script requeues the task: None none, () any but 0
    exit_codes: tuple[int, ...] | None = None
    backoff_ms: int = 0  # the policy's backoff_secs: the wait before the job script's next attempt

    @property
    def grace_secs(self) -> int:
        """How long the program has after the warning to save and exit before the script
        requeues it anyway (the rest of the warning period is a margin for the requeue)."""
        warn = self.warn_secs or 0
        return max(1, warn - min(10, warn // 4))


def plan(retry: Retry | None, time_limit: int | None, signal_before_limit: int | None) -> Plan:
    """The plan for a job running under ``retry`` (None: the default policy)."""
    policy = retry or Retry()
    retried = policy.max_attempts > 1
    on_limit = retried and "timeout" in policy.on and time_limit is not None
    warn: int | None = None
    if time_limit is not None and signal_before_limit != 0 and (on_limit or signal_before_limit):
        warn = signal_before_limit or min(DEFAULT_SIGNAL_BEFORE_LIMIT, time_limit // 2)
        if warn >= time_limit:
            raise LaunchError(f"signal_before_limit={warn} s is not shorter than the job's time_limit "
                              f"({time_limit} s): give a smaller signal_before_limit or a longer time_limit.")
    exit_codes = None if not retried else () if "error" in policy.on else (policy.exit_codes or None)
    return Plan(requeue=retried and any(c in policy.on for c in _NATIVE), on_limit=on_limit and bool(warn),
                max_attempts=policy.max_attempts, warn_secs=warn, exit_codes=exit_codes,
                backoff_ms=min(_MAX_BACKOFF_MS, math.ceil(policy.backoff_secs * 1000)) if retried else 0)


def slurm_directives(p: Plan) -> list[str]:
    d = ["--requeue" if p.requeue else "--no-requeue"]
    if p.warn_secs:
        d.append(f"--signal=B:USR1@{p.warn_secs}")  # B: the batch shell (the script, or the program it became)
    return d


def sge_directives(p: Plan, time_limit: int | None) -> list[str]:
    d = ["-r y" if p.requeue else "-r n"]
    if p.warn_secs and time_limit:
        d += ["-notify", f"-l s_rt={time_limit - p.warn_secs}"]  # SIGUSR1 at the soft limit
    return d


# Shell after the task's environment is read: the attempt number and the checkpoint directory.
# Slurm counts its own requeues; Grid Engine only says "restarted", so the script counts the
# task's starts in the run directory.
_ATTEMPT = {
    "slurm": 'XHPC_RESTARTS=${SLURM_RESTART_COUNT:-0}\n',
    "sge": ('mkdir -p "$XHPC_RUN/starts" && printf . >> "$XHPC_RUN/starts/$XHPC_INDEX"\n'
            'XHPC_RESTARTS=$(( $(wc -c < "$XHPC_RUN/starts/$XHPC_INDEX") - 1 ))\n'),
}
_COUNT = 'XCORE_ATTEMPT=$(( ${XCORE_ATTEMPT:-1} + XHPC_RESTARTS ))\n'
# Grid Engine reschedules a rerunnable task however often it is asked (-r y is the whole
# array's): a rescheduled run beyond max_attempts ends at once, and refused/INDEX.ATTEMPT.MAX
# tells status so. The first run of a submission always runs (`xcore retry` may go beyond).
_REFUSE_SGE = ('if [ "$XHPC_RESTARTS" -gt 0 ] && [ "$XCORE_ATTEMPT" -gt {max} ]; then\n'
               '    echo "xhpc: attempt $XCORE_ATTEMPT refused: max_attempts={max} used up" >&2\n'
               '    mkdir -p "$XHPC_RUN/refused" && : > "$XHPC_RUN/refused/$XHPC_INDEX.$XCORE_ATTEMPT.{max}"\n'
               '    exit {code}\n'
               'fi\n')
# A rerun appends to the same log: a line says where the next attempt starts.
_COMMON = ('[ "$XHPC_RESTARTS" = 0 ] || echo "----- xhpc: attempt $XCORE_ATTEMPT -----"\n'
           'export XCORE_ATTEMPT\n'
           '[ -z "${XCORE_CHECKPOINT_DIR:-}" ] || mkdir -p -- "$XCORE_CHECKPOINT_DIR" '
           '|| { echo "xhpc: cannot create $XCORE_CHECKPOINT_DIR" >&2; exit 98; }\n')
# The last attempt: Slurm must not requeue it again (a preempted last attempt stays PREEMPTED).
_LAST_ATTEMPT_SLURM = ('if [ "$XCORE_ATTEMPT" -ge {max} ]; then\n'
                       '    scontrol update jobid="$SLURM_JOB_ID" requeue=0 >/dev/null 2>&1 || '
                       'echo "xhpc: could not turn off requeue for the last attempt" >&2\n'
                       'fi\n')


def attempt_lines(scheduler: str, p: Plan) -> str:
    text = _ATTEMPT[scheduler] + _COUNT
    if scheduler == "sge" and p.requeue:
        text += _REFUSE_SGE.format(max=p.max_attempts, code=REFUSED_EXIT)
    text += _COMMON
    if scheduler == "slurm" and p.requeue:
        text += _LAST_ATTEMPT_SLURM.format(max=p.max_attempts)
    return text


# Runs the program as a child instead of exec, when the policy retries timeouts or the
# program's failures. On the warning (SIGUSR1) the program gets it too (Slurm signals only the
# batch shell; Grid Engine the whole job) and has GRACE seconds to save and exit: exit 0 means
# the work is done; anything else (another exit code, killed by the signal, still running) puts
# the task back in the queue while attempts remain, as does an exit code the policy retries.
# ``requeued/INDEX.ATTEMPT.CLASS[.CODE]`` tells status why that run ended (the scheduler only
# records "requeued").
_RUN_CHILD = r"""XHPC_WARNED=
trap 'XHPC_WARNED=$SECONDS; {forward}' USR1
"${{XHPC_CMD[@]}}" "${{XHPC_ARGS[@]}}" &
XHPC_CHILD=$!
while :; do
    wait "$XHPC_CHILD"; XHPC_RC=$?
    kill -0 "$XHPC_CHILD" 2>/dev/null || break
    if [ -n "$XHPC_WARNED" ]; then
        while kill -0 "$XHPC_CHILD" 2>/dev/null && [ $((SECONDS - XHPC_WARNED)) -lt {grace} ]; do sleep 1; done
        if kill -0 "$XHPC_CHILD" 2>/dev/null; then XHPC_RC=still-running; break; fi
    fi
done
XHPC_WHY=
if [ "$XHPC_RC" != 0 ] && [ -n "$XHPC_WARNED" ] && {on_limit}; then XHPC_WHY=timeout
elif {on_exit}; then XHPC_WHY=error.$XHPC_RC
fi
if [ -n "$XHPC_WHY" ] && [ "$XCORE_ATTEMPT" -lt {max} ]; then
    echo "xhpc: attempt $XCORE_ATTEMPT ended (${{XHPC_WHY/./, exit code }}); attempt $((XCORE_ATTEMPT + 1)) follows" >&2
    mkdir -p "$XHPC_RUN/requeued" && : > "$XHPC_RUN/requeued/$XHPC_INDEX.$XCORE_ATTEMPT.$XHPC_WHY"
{requeue}fi
if [ "$XHPC_RC" = still-running ]; then wait "$XHPC_CHILD"; XHPC_RC=$?; fi
exit "$XHPC_RC"
"""
_REQUEUE = {
    # requeue=1 first: a policy that does not retry preemption submitted the job --no-requeue.
    "slurm": ('    scontrol update jobid="$SLURM_JOB_ID" requeue=1 >/dev/null 2>&1\n'
              '    if scontrol requeue "$SLURM_JOB_ID"; then while :; do sleep 5; done; fi\n'
              '    echo "xhpc: scontrol requeue failed" >&2\n'),
    "sge": '    kill -KILL "$XHPC_CHILD" 2>/dev/null; exit 99  # Grid Engine reschedules a job that exits 99\n',
}
# With backoff_secs: the wait before attempt N+1 is backoff_secs * 2**(N-1) (``Retry.backoff``),
# rounded up to whole seconds; the doubling stops at 2**20. The start time given to the
# scheduler is a second later: both count whole seconds from "now" truncated, and a task whose
# start was set at 148.9 s for 32 s started 31.7 s after its attempt ended (seen in CI).
_WAIT = ('    XHPC_WAIT=$(( (({ms} << (XCORE_ATTEMPT > 21 ? 20 : XCORE_ATTEMPT - 1)) + 999) / 1000 ))\n')
_SAID = 'echo "xhpc: attempt $((XCORE_ATTEMPT + 1)) starts in $XHPC_WAIT s or later (backoff)" >&2'
_NOT_DELAYED = 'echo "xhpc: could not delay attempt $((XCORE_ATTEMPT + 1)) by its backoff" >&2'
_DELAYED_REQUEUE = {
    # Slurm holds a requeued task by itself for cred_expire + 1 s from when it ended (it ends up
    # to KillWait s after the requeue): a backoff within that needs nothing, a longer one is the
    # task's new start time. The update comes after the requeue (a running task has no start
    # time to set) and the requeue sends SIGTERM: the script ignores it to live until then.
    "slurm": ('    scontrol update jobid="$SLURM_JOB_ID" requeue=1 >/dev/null 2>&1\n' + _WAIT +
              "    XHPC_HOLD=$(scontrol show config 2>/dev/null | awk '/cred_expire=/ {{sub(/.*cred_expire=/, \"\"); "
              "c = $0 + 0}} /^KillWait / {{k = $3 + 0}} END {{print (c ? c : 120) + 1 + (k ? k : 30)}}')\n"
              "    trap '' TERM\n"
              '    if scontrol requeue "$SLURM_JOB_ID"; then\n'
              '        if [ "$XHPC_WAIT" -gt "${{XHPC_HOLD:-0}}" ]; then\n'
              '            if scontrol update jobid="$SLURM_JOB_ID" StartTime="now+$((XHPC_WAIT + 1))" \\\n'
              '                    >/dev/null; then\n'
              '                ' + _SAID + '\n'
              '            else ' + _NOT_DELAYED + '; fi\n'
              '        fi\n'
              '        while :; do sleep 5; done\n'
              '    fi\n'
              '    echo "xhpc: scontrol requeue failed" >&2\n'),
    # Grid Engine: qalter -a is refused for a task ("works only on jobs"), so the task is held
    # (the hold takes effect once it is back in the queue) and a tiny job submitted with -a
    # releases it at its time. If either fails the next attempt starts at once.
    "sge": (_WAIT +
            '    XHPC_TASK_ID="$JOB_ID.$SGE_TASK_ID"\n'
            '    if qhold -h u "$XHPC_TASK_ID" >/dev/null; then\n'
            '        if qsub -terse -a "$(date -d "@$(( $(date +%s) + XHPC_WAIT + 1 ))" +%Y%m%d%H%M.%S)" -b y -r n '
            '-N xhpc-backoff -wd "$XHPC_RUN" -o /dev/null -j y "$(command -v qrls || echo qrls)" -h u '
            '"$XHPC_TASK_ID" >/dev/null; then\n'
            '            ' + _SAID + '\n'
            '        else\n'
            '            qrls -h u "$XHPC_TASK_ID" >/dev/null\n'
            '            ' + _NOT_DELAYED + '\n'
            '        fi\n'
            '    else ' + _NOT_DELAYED + '; fi\n'
            '    kill -KILL "$XHPC_CHILD" 2>/dev/null; exit 99  # Grid Engine reschedules a job that exits 99\n'),
}
_FORWARD = {"slurm": 'kill -USR1 "$XHPC_CHILD" 2>/dev/null', "sge": ":"}


def _exit_test(codes: tuple[int, ...] | None) -> str:
    if codes is None:
        return "false"
    if not codes:
        return '[ "$XHPC_RC" != 0 ]'
    return f'case " {" ".join(map(str, codes))} " in *" $XHPC_RC "*) true;; *) false;; esac'


def run_lines(scheduler: str, p: Plan) -> str | None:
    """The lines that run the program, or None: ``exec`` it (the policy retries neither
    timeouts nor the program's failures: nothing changes for the job)."""
    if not p.on_limit and p.exit_codes is None:
        return None
    requeue = _DELAYED_REQUEUE[scheduler].format(ms=p.backoff_ms) if p.backoff_ms else _REQUEUE[scheduler]
    return _RUN_CHILD.format(forward=_FORWARD[scheduler], grace=p.grace_secs, max=p.max_attempts,
                             requeue=requeue, on_limit="true" if p.on_limit else "false",
                             on_exit=_exit_test(p.exit_codes))
