"""Retries without a cluster: policy -> directives and job script, failure classes and
attempts from recorded scheduler output (sacct --duplicates, qstat + qacct), env() parsing."""

from __future__ import annotations

import base64
import json
import math
import subprocess

import pytest

import xcore as xm
from xcore.plugin import LaunchError, Status
from xhpc import retries, scripts, task_env, tracking
from xhpc.executors import GridEngine, Slurm
from xhpc.handles import GridEngineHandle, SlurmHandle
from xhpc.schedulers import SCHEDULERS

TIMEOUTS = xm.Retry(max_attempts=3, on=("preemption", "node_failure", "timeout"))


def test_plan_follows_the_policy() -> None:
    default = retries.plan(None, 3600, None)
    assert (default.requeue, default.on_limit, default.warn_secs) == (True, False, None)
    assert retries.slurm_directives(default) == ["--requeue"]
    never = retries.plan(xm.Retry(max_attempts=1), 3600, None)
    assert retries.slurm_directives(never) == ["--no-requeue"]
    assert retries.sge_directives(never, 3600) == ["-r n"]
    errors_only = retries.plan(xm.Retry(on=("error",)), None, None)
    assert not errors_only.requeue and not errors_only.on_limit and errors_only.exit_codes == ()
    assert retries.plan(xm.Retry(exit_codes=(75,)), None, None).exit_codes == (75,)
    assert default.exit_codes is None and retries.plan(xm.Retry(max_attempts=1, on=("error",)), None, None).exit_codes \
        is None
    hours = retries.plan(TIMEOUTS, 4 * 3600, None)
    assert (hours.on_limit, hours.warn_secs, hours.grace_secs) == (True, 300, 290)
    assert retries.slurm_directives(hours) == ["--requeue", "--signal=B:USR1@300"]
    assert retries.sge_directives(hours, 4 * 3600) == ["-r y", "-notify", f"-l s_rt={4 * 3600 - 300}"]
    assert retries.plan(TIMEOUTS, 60, None).warn_secs == 30  # at most half the limit
    assert retries.plan(TIMEOUTS, None, None).warn_secs is None  # no limit, no warning
    assert retries.plan(TIMEOUTS, 3600, 0).warn_secs is None and not retries.plan(TIMEOUTS, 3600, 0).on_limit
    # Asked for without a timeout retry: the signal comes, the program is exec'd as before.
    asked = retries.plan(None, 3600, 120)
    assert (asked.warn_secs, asked.on_limit) == (120, False)
    with pytest.raises(LaunchError, match="signal_before_limit=60 s is not shorter than the job's time_limit"):
        retries.plan(TIMEOUTS, 60, 60)


def test_signal_before_limit_field() -> None:
    assert Slurm(local=True, signal_before_limit="5m").signal_before_limit == 300
    assert Slurm(local=True, signal_before_limit=0).signal_before_limit == 0
    assert GridEngine(local=True).signal_before_limit is None
    with pytest.raises(ValueError, match="signal_before_limit="):
        Slurm(local=True, signal_before_limit="soon")
    with pytest.raises(ValueError, match=r"signal_before_limit=600\) must be shorter than time_limit=600 s"):
        GridEngine(local=True, time_limit="10m", signal_before_limit=600)


@pytest.mark.parametrize("policy", [None, xm.Retry(max_attempts=1), TIMEOUTS, xm.Retry(on=("error",)),
                                    xm.Retry(exit_codes=(75, 3)), xm.Retry(exit_codes=(75,), backoff_secs=2.5)])
@pytest.mark.parametrize("executor", [Slurm(local=True, time_limit=600, directives=["--requeue"]),
                                      GridEngine(local=True, time_limit=600, modules=["cuda/12.1"])])
def test_job_scripts_are_valid_bash(executor: object, policy: xm.Retry | None) -> None:
    plan = retries.plan(policy, 600, None)
    text = scripts.job_script(executor, "n", "/tmp/run", [0, 10, 20], plan)  # type: ignore[arg-type]
    assert subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True).returncode == 0, text
    child = plan.on_limit or plan.exit_codes is not None
    assert ('"${XHPC_CMD[@]}" "${XHPC_ARGS[@]}" &' in text) is child
    assert ('exec "${XHPC_CMD[@]}"' in text) is not child
    if isinstance(executor, Slurm):
        lines = text.splitlines()
        # the user's own directives come after xcore's, so they win
        assert lines.index("#SBATCH --requeue") > lines.index(f"#SBATCH {retries.slurm_directives(plan)[0]}") \
            or retries.slurm_directives(plan)[0] == "--requeue"
        assert ('requeue=0' in text) is plan.requeue  # the last attempt is not requeued again
    # 99 tells Grid Engine "reschedule me": only the time-limit requeue may exit with it
    assert ("exit 99" in text) is (child and isinstance(executor, GridEngine))
    # backoff: only a requeue the script makes waits (a new start time, or a hold and its release)
    assert ("StartTime=" in text or "qhold" in text) is bool(child and plan.backoff_ms)
    # a rerunnable Grid Engine task refuses a rescheduled run beyond max_attempts
    assert ("refused: max_attempts" in text) is (plan.requeue and isinstance(executor, GridEngine))


def test_backoff_doubles_per_attempt_in_the_job_script() -> None:
    """The script's wait before attempt N+1 is Retry.backoff(N), rounded up to whole seconds;
    a policy without backoff (or one that never retries) adds nothing."""
    policy = xm.Retry(max_attempts=30, exit_codes=(75,), backoff_secs=1.5)
    plan = retries.plan(policy, None, None)
    assert plan.backoff_ms == 1500
    assert retries.plan(xm.Retry(exit_codes=(75,)), None, None).backoff_ms == 0
    assert retries.plan(xm.Retry(max_attempts=1, backoff_secs=9), None, None).backoff_ms == 0
    line = next(x for x in retries.run_lines("sge", plan).splitlines() if "XHPC_WAIT=$((" in x)
    for attempt in (1, 2, 3, 25):
        out = subprocess.run(["bash", "-c", f"XCORE_ATTEMPT={attempt}\n{line}\necho $XHPC_WAIT"],
                             capture_output=True, text=True).stdout
        assert int(out) == math.ceil(policy.backoff(min(attempt, 21))), attempt


def _slurm(squeue: str, sacct: str) -> dict[tuple[str, int], xm.JobState]:
    return SCHEDULERS["slurm"].parse_states(f"{squeue}\n@@XHPC-SACCT\n{sacct}\n")


def test_slurm_requeued_runs_are_earlier_attempts() -> None:
    sacct = "\n".join([
        "10_0|PREEMPTED|0:0|100|110|11|n1",
        "10_0|RUNNING|0:0|140|Unknown|11|n1",
        "10_1|REQUEUED|0:0|100|105|12|n1",
        "10_1|NODE_FAIL|0:0|130|135|12|n1",
        "10_1|COMPLETED|0:0|150|160|12|n1",
        "10_2|PREEMPTED|0:0|100|110|10|n1",  # requeued: squeue lists it pending, sacct not yet
        "10_3|TIMEOUT|0:0|100|160|13|n1",
        "10_4|COMPLETED|0:0|100|120|14|n1",
    ])
    squeue = "\n".join(["10|0|RUNNING|None|140|11", "10|2|PENDING|BeginTime|N/A|10",
                        "10|4|COMPLETING|None|100|14"])
    states = _slurm(squeue, sacct)
    running = states[("10", 0)]
    assert (running.status, running.attempt) == (Status.RUNNING, 2)
    assert [(a.number, a.failure, a.started_at) for a in running.previous_attempts] == [(1, "preempted", 100.0)]
    done = states[("10", 1)]
    assert (done.status, done.attempt) == (Status.COMPLETED, 3)
    assert [(a.number, a.failure) for a in done.previous_attempts] == [(1, "preempted"), (2, "node_failure")]
    pending = states[("10", 2)]
    assert (pending.status, pending.attempt, pending.previous_attempts[0].failure) == (Status.PENDING, 2, "preempted")
    timeout = states[("10", 3)]
    assert (timeout.status, timeout.failure, timeout.attempt, timeout.previous_attempts) == (
        Status.FAILED, "timeout", None, ())
    # squeue's COMPLETING is the run sacct just closed, not a new attempt
    assert states[("10", 4)].status is Status.COMPLETED and states[("10", 4)].attempt is None


@pytest.mark.parametrize(("state", "exit_code", "failure"), [
    ("OUT_OF_MEMORY", "0:125", "out_of_memory"), ("NODE_FAIL", "0:0", "node_failure"),
    ("BOOT_FAIL", "0:0", "node_failure"), ("DEADLINE", "0:0", "timeout"), ("PREEMPTED", "0:0", "preempted"),
    ("FAILED", "3:0", "error"), ("FAILED", "0:9", "error"), ("FAILED", "98:0", "launch"),
])
def test_slurm_failure_classes(state: str, exit_code: str, failure: str) -> None:
    final = _slurm("", f"7_0|{state}|{exit_code}|100|120|8|n1")[("7", 0)]
    assert (final.status, final.failure) == (Status.FAILED, failure)


def _qacct(jobnumber: str, task: int, failed: str, exit_status: int, category: str = "NONE") -> str:
    return "\n".join([f"jobnumber    {jobnumber}", f"taskid       {task}", f"failed       {failed}",
                      f"exit_status  {exit_status}", "start_time   -/-", "end_time     -/-",
                      f"category     {category}"])


_QSTAT = """<?xml version='1.0'?>
<job_info><queue_info><job_list state="running"><JB_job_number>5</JB_job_number><state>Rr</state>
<JAT_start_time>2026-11-27T18:08:52</JAT_start_time><tasks>2</tasks></job_list></queue_info></job_info>"""


def test_sge_rescheduled_runs_are_earlier_attempts() -> None:
    out = "\n".join([_QSTAT, "@@XHPC-QACCT",
                     _qacct("5", 1, "25  : rescheduling", 0), _qacct("5", 1, "0", 0),
                     _qacct("5", 2, "25  : rescheduling", 0),
                     _qacct("5", 3, "25  : rescheduling", 0),
                     _qacct("5", 4, "37  : qmaster enforced h_rt, h_cpu, or h_vmem limit", 137, "-l h_vmem=1G"),
                     _qacct("5", 5, "26  : opening input/output file", 0),
                     _qacct("5", 6, "0", 3)])
    states = SCHEDULERS["sge"].parse_states(out)
    done = states[("5", 1)]
    assert (done.status, done.attempt, [a.failure for a in done.previous_attempts]) == (
        Status.COMPLETED, 2, ["preempted"])
    assert (states[("5", 2)].status, states[("5", 2)].attempt) == (Status.RUNNING, 2)
    assert (states[("5", 3)].status, states[("5", 3)].attempt) == (Status.PENDING, 2)  # back in the queue
    assert states[("5", 4)].failure == "out_of_memory"
    assert states[("5", 5)].failure == "launch"
    assert (states[("5", 6)].failure, states[("5", 6)].exit_code) == ("error", 3)


def test_attempts_count_on_from_the_submissions_first_attempt() -> None:
    """An `xcore retry` submission starts at attempt N; a run the job script requeued at the
    time-limit warning (its requeued/INDEX.ATTEMPT marker) is a timeout, not a preemption."""
    state = _slurm("", "\n".join(["9_0|REQUEUED|0:0|100|110|9|n1", "9_0|COMPLETED|0:0|130|150|9|n1"]))[("9", 0)]
    handle = SlurmHandle(cluster="c", job_id="9", task=0, index=4, run_dir="/r", attempt=3)
    numbered = tracking._numbered(state, handle, {("/r", 4, 3): ("timeout", None)})
    assert numbered.attempt == 4
    [first] = numbered.previous_attempts
    assert (first.number, first.failure) == (3, "timeout")
    [failed] = tracking._numbered(state, handle, {("/r", 4, 3): ("error", 3)}).previous_attempts
    assert (failed.failure, failed.exit_code, failed.message) == ("error", 3, "exit code 3 (requeued)")
    assert tracking._numbered(state, handle, {}).previous_attempts[0].failure == "preempted"


def test_a_refused_reschedule_reads_failed_with_the_class_before_it() -> None:
    """A Grid Engine run the job script refused (refused/INDEX.ATTEMPT.MAX: max_attempts used
    up) is FAILED with the class of the attempt before it, and says why."""
    out = "\n".join(["@@XHPC-QACCT", _qacct("5", 1, "25  : rescheduling", 0), _qacct("5", 1, "25  : rescheduling", 0),
                     _qacct("5", 1, "0", retries.REFUSED_EXIT)])
    state = SCHEDULERS["sge"].parse_states(out)[("5", 1)]
    handle = GridEngineHandle(cluster="c", job_id="5", task=1, index=0, run_dir="/r")
    refused = tracking._numbered(state, handle, {}, {("/r", 0, 3): 2})
    assert (refused.status, refused.attempt, refused.failure) == (Status.FAILED, 3, "preempted")
    assert refused.message == "attempt 3 refused: max_attempts=2 used up (attempt 2: rescheduled)"
    assert [a.number for a in refused.previous_attempts] == [1, 2]
    assert tracking._numbered(state, handle, {}, {("/r", 0, 2): 2}).failure == "error"  # another attempt's marker


def test_env_parses_the_task_file_records() -> None:
    head = "\0".join(["/cwd", "2", "bash", "-c", "SHARED=1", "XCORE_ATTEMPT=1", "XHPC_PACKAGE_DIR=/p"]) + "\0"
    task = "\0".join(["1", "arg", "TOKEN=a=b\nc", "XCORE_CHECKPOINT_DIR=/ck"]) + "\0"
    meta = json.dumps({"backend_env": ["XHPC_PACKAGE_DIR"]})
    out = "\n".join(base64.b64encode(x.encode()).decode() for x in (head, task, meta)) + "\n"
    assert task_env.parse(out) == {"SHARED": "1", "TOKEN": "a=b\nc"}
    assert task_env.parse("") is None and task_env.parse("\n\n") is None


def test_a_submission_that_failed_reads_launch() -> None:
    handle = SlurmHandle(cluster="c", job_id="", task=0, index=0, run_dir="/r", error="sbatch: invalid partition")
    [state] = tracking.states([handle])
    assert (state.status, state.failure) == (Status.FAILED, "launch")
