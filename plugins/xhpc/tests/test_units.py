"""Pieces that need no scheduler: config, directives, task encoding, parsing, packaging safety."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import xcore as xm
from xcore.errors import ConfigurationError, PackagingError
from xcore.model.status import Status
from xhpc import config, scripts
from xhpc.executors import GridEngine, Slurm, parse_time_limit
from xhpc.schedulers import ANY_TASK, CANCELLED_BEFORE_START, GridEngineScheduler, SlurmScheduler


def test_time_limits() -> None:
    assert parse_time_limit(90) == 90
    assert parse_time_limit("1:30:00") == 5400
    assert parse_time_limit("2-00:00:00") == 172800
    assert parse_time_limit("30") == 1800  # a bare number is minutes, as sbatch reads it
    assert parse_time_limit("4h") == 14400
    with pytest.raises(ValueError):
        parse_time_limit("soon")


def test_slurm_directives() -> None:
    ex = Slurm(requirements=xm.JobRequirements(cpu=4, memory=8 * xm.GiB, a100=2), time_limit="1:00:00",
               partition="gpu", account="lab", qos="high", constraint="ib", exclusive=True,
               directives=["--mail-type=END"])
    lines = scripts.slurm_directives(ex, "my sweep", "/s/runs/r")
    for expected in ("--cpus-per-task=4", "--mem=8192M", "--gres=gpu:a100:2", "--time=1:00:00",
                     "--partition=gpu", "--account=lab", "--qos=high", "--constraint=ib", "--exclusive",
                     "--mail-type=END", "--job-name=my_sweep"):
        assert f"#SBATCH {expected}" in lines
    assert "#SBATCH --gres=gpu:2" in scripts.slurm_directives(Slurm(requirements={"gpu": 2}), "x", "/r")


def test_sge_directives() -> None:
    ex = GridEngine(requirements=xm.JobRequirements(cpu=4, memory=8 * xm.GiB, gpu=1), time_limit=120,
                    queue="all.q", project="p", parallel_environment="smp", resources={"tmpfree": "10G"})
    lines = scripts.sge_directives(ex, "1st", "/s/runs/r")
    for expected in ("-pe smp 4", "-l h_vmem=2048M", "-l gpu=1", "-l h_rt=120", "-q all.q", "-P p",
                     "-l tmpfree=10G", "-N x1st", "-S /bin/bash"):
        assert f"#$ {expected}" in lines


def test_directive_values_are_one_line() -> None:
    with pytest.raises(ValueError):
        Slurm(partition="gpu\n#SBATCH --uid=0")


def test_task_encoding_is_data() -> None:
    tasks = [scripts.Task(["it's", "", "a\nb"], {"A": "1", "B": "x"}), scripts.Task(["$HOME"], {"A": "1", "B": "y"})]
    common = scripts.common_env(tasks)
    assert common == {"A": "1"}
    data, offsets = scripts.encode_tasks("/w", ["python3", "-m", "m"], common, tasks)
    records = [data[offsets[i]:offsets[i + 1]].split(b"\0")[:-1] for i in range(len(offsets) - 1)]
    assert records[0] == [b"/w", b"3", b"python3", b"-m", b"m", b"A=1"]
    assert records[1] == [b"3", b"it's", b"", b"a\nb", b"B=x"]
    assert records[2] == [b"1", b"$HOME", b"B=y"]


def test_job_script_reads_args_without_eval(tmp_path: Path) -> None:
    """Run the generated script with bash directly (as a scheduler would) and compare argv."""
    args = ["it's", "`echo INJECTED`", "$(id)", "$HOME", "a\nb", "", "ünï ✓", "\\", "\"q\""]
    tasks = [scripts.Task(args, {"V": "it's $HOME"}), scripts.Task(["second"], {"V": "2"})]
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    prog = "import json,os,sys; print(json.dumps([sys.argv[1:], os.environ['V']]))"
    data, offsets = scripts.encode_tasks(str(tmp_path), [sys.executable, "-c", prog], {}, tasks)
    (run / "tasks.bin").write_bytes(data)
    script = scripts.job_script(Slurm(), "t", str(run), offsets)
    (run / "job.sh").write_text(script)
    subprocess.run(["bash", str(run / "job.sh"), "0"], env={"PATH": "/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "0"},
                   check=True)
    assert json.loads((run / "logs" / "0.log").read_text()) == [args, "it's $HOME"]
    rc = subprocess.run(["bash", str(run / "job.sh"), "5"], env={"PATH": "/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "0"})
    assert rc.returncode == 97  # index out of range: a clear error, not a wrong task


def test_singularity_command_line() -> None:
    argv = scripts.container_command("apptainer", "docker://python:3.11", ["python3", "-m", "m"], {"/data": "/d"},
                                     ["--cleanenv"], gpus=True, extra_binds=["/s/artifacts/abc"])
    assert argv == ["apptainer", "exec", "--nv", "--bind", "/s/artifacts/abc", "--bind", "/data:/d", "--cleanenv",
                    "docker://python:3.11", "python3", "-m", "m"]
    command = scripts.container_command("singularity", "/i.sif", [], {}, [], gpus=False)
    assert command == ["singularity", "run", "/i.sif"]


def test_slurm_state_parsing() -> None:
    out = ("12|3|PENDING|Resources|0\n12|4|RUNNING|None|1700000000\n12|5|FAILED|NonZeroExitCode|1700000000\n"
           "@@XHPC-SACCT\n12_0|COMPLETED|0:0|1700000000|1700000001\n12_1|FAILED|3:0|1700000000|1700000001\n"
           "12_2|CANCELLED by 0|0:15|1700000000|1700000001\n12_6|TIMEOUT|0:0|1|2\n"
           "12_[3-4]|PENDING|0:0|Unknown|Unknown\n")
    s = SlurmScheduler().parse_states(out)
    assert s[("12", 0)].status is Status.COMPLETED
    assert (s[("12", 1)].status, s[("12", 1)].message, s[("12", 1)].exit_code) == (Status.FAILED, "exit code 3", 3)
    assert s[("12", 2)].status is Status.CANCELLED
    assert s[("12", 3)].message == "pending: Resources"
    assert s[("12", 4)].status is Status.RUNNING
    assert s[("12", 5)].status is Status.RUNNING  # finished in squeue, not yet in sacct: wait for the exit code
    assert s[("12", 6)].message == "time limit exceeded"


def test_sge_state_parsing() -> None:
    out = ("<?xml version='1.0'?><job_info><queue_info><job_list state='running'><JB_job_number>7</JB_job_number>"
           "<state>r</state><JAT_start_time>2025-01-01T10:00:00</JAT_start_time><tasks>2</tasks></job_list>"
           "</queue_info><job_info><job_list state='pending'><JB_job_number>7</JB_job_number><state>qw</state>"
           "<tasks>3-4:1</tasks></job_list></job_info></job_info>\n@@XHPC-QACCT\n"
           "jobnumber    7\ntaskid       1\nfailed       0    \nexit_status  3\n"
           "jobnumber    7\ntaskid       5\nfailed       37  : qmaster enforced h_rt limit\nexit_status  137\n")
    s = GridEngineScheduler().parse_states(out)
    assert s[("7", 1)].status is Status.FAILED and s[("7", 1)].exit_code == 3
    assert s[("7", 2)].status is Status.RUNNING
    assert s[("7", 3)].status is Status.PENDING and s[("7", 4)].status is Status.PENDING
    assert "time limit" in s[("7", 5)].message


@pytest.mark.parametrize("scheduler,out", [
    (SlurmScheduler(), "12|0-2,4|PENDING|JobHeldUser|N/A|12|\n12|3|RUNNING|None|1700000000|13|n\n"
                       "40|0-9%2|PENDING|JobArrayTaskLimit|N/A|40|\n@@XHPC-SACCT\n"),
    (GridEngineScheduler(), "<?xml version='1.0'?><job_info><job_info><job_list state='pending'>"
                            "<JB_job_number>7</JB_job_number><state>hqw</state><tasks>1-4:1</tasks></job_list>"
                            "<job_list state='pending'><JB_job_number>8</JB_job_number><state>qw</state>"
                            "<tasks>1-2:1</tasks></job_list></job_info></job_info>\n@@XHPC-QACCT\n"),
], ids=["slurm", "sge"])
def test_a_pending_state_is_the_same_object_from_one_poll_to_the_next(scheduler: Any, out: str) -> None:
    """A watcher skips a job whose backend returned the very state object it applied last time
    (issue 31): the held tasks of a cluster whose answer changed elsewhere are not compared again."""
    first, second = scheduler.parse_states(out), scheduler.parse_states(out)
    pending = [key for key, state in first.items() if state.status is Status.PENDING]
    assert len(pending) >= 6
    assert all(second[key] is first[key] for key in pending)
    assert len({first[key].message for key in pending}) == 2  # one state per message, not one for all


def test_config_errors_and_selection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("XCORE_CLUSTER", raising=False)
    assert config.resolve(None, "slurm").is_local  # nothing configured: the login node
    (tmp_path / "clusters.toml").write_text(
        '[clusters.a]\nhost = "h"\nscheduler = "slurm"\n[clusters.b]\nhost = "h2"\nscheduler = "sge"\n'
        '[clusters.b.defaults]\nqueue = "all.q"\n')
    assert config.resolve(None, "sge").name == "b"
    monkeypatch.setenv("XCORE_CLUSTER", "a")
    assert config.resolve(None, "slurm").name == "a"
    with pytest.raises(ConfigurationError, match="runs scheduler 'slurm'"):
        config.resolve(None, "sge")
    with pytest.raises(ConfigurationError, match="not in"):
        config.resolve("nope", "slurm")
    (tmp_path / "clusters.toml").write_text('[clusters.a]\nhots = "typo"\n')
    with pytest.raises(ConfigurationError, match="unknown keys"):
        config.load_clusters()


def test_cluster_list_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    (tmp_path / "clusters.toml").write_text('default = "uni"\n[clusters.uni]\nhost = "login"\nuser = "me"\n')
    out = subprocess.run([sys.executable, "-m", "xcore.cli.main", "cluster", "list", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["default"] == "uni" and data["clusters"][0]["host"] == "login"


def test_archives_are_reproducible_and_safe(tmp_path: Path) -> None:
    from xhpc.packaging import build_archive, safe_member_name, walk_files

    (tmp_path / "p" / "sub").mkdir(parents=True)
    (tmp_path / "p" / "a.py").write_text("x")
    (tmp_path / "p" / "sub" / "b.py").write_text("y")
    (tmp_path / "p" / "escape").symlink_to("/etc/passwd")
    with pytest.warns(UserWarning, match="escape"):
        files = list(walk_files(tmp_path / "p"))
    assert [a for a, _ in files] == ["a.py", "sub/b.py"]  # the symlink leaving the project is not followed
    assert build_archive(files) == build_archive(files)
    for bad in ("../x", "/etc/x", "a/../../x"):
        with pytest.raises(PackagingError):
            safe_member_name(bad)


def test_import_is_lazy() -> None:
    code = "import sys, xhpc.hooks; print('fabric' in sys.modules, 'paramiko' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


APPTAINER_ENV = "XCORE_REQUIRE_APPTAINER"


@pytest.mark.live_tier("apptainer")
def test_singularity_live(tmp_path: Path) -> None:
    """The generated command on a real runtime. Apptainer cannot be installed by scripts/infra,
    so this tier runs where the binary exists; XCORE_REQUIRE_APPTAINER=1 makes its absence fail."""
    from xcore.testing import require_live_tier

    runtime = shutil.which("apptainer") or shutil.which("singularity")
    require_live_tier("apptainer", runtime is not None, APPTAINER_ENV,
                      "no Debian bookworm package and nothing on PyPI, so scripts/infra cannot install it")
    argv = scripts.container_command(runtime, "docker://busybox", ["echo", "it's ok"], {}, [], gpus=False)
    assert subprocess.run(argv, capture_output=True, text=True, timeout=300).stdout.strip() == "it's ok"


@pytest.mark.parametrize("failed", ["37  : qmaster enforced h_rt, h_cpu, or h_vmem limit", "100 : assumedly after job",
                                    "0"])
def test_sge_job_killed_at_its_h_rt_reads_as_time_limit(failed: str) -> None:
    from xhpc.schedulers import GridEngineScheduler

    state = GridEngineScheduler._final({
        "failed": failed, "exit_status": "137                  (Killed)", "category": "-l h_rt=3",
        "start_time": "Sat Nov 21 16:42:53 2026", "end_time": "Sat Nov 21 16:42:57 2026",
    })
    assert state.status is Status.FAILED and "time limit exceeded" in state.message and state.exit_code == 137


def test_sge_job_killed_early_is_not_a_time_limit() -> None:
    from xhpc.schedulers import GridEngineScheduler

    state = GridEngineScheduler._final({
        "failed": "100 : assumedly after job", "exit_status": "137", "category": "-l h_rt=60",
        "start_time": "Sat Nov 21 16:42:53 2026", "end_time": "Sat Nov 21 16:42:57 2026",
    })
    assert "time limit" not in state.message and "signal 9" in state.message


def test_slurm_records_without_task_id() -> None:
    """Lines as the real Slurm 22.05 prints them: a one-task array just ended (sacct: ``ID``
    only), an array cancelled as a whole while held (squeue: task N/A; sacct: ``ID``,
    Start = End, no node), and a planned start after the end."""
    out = ("208|0|COMPLETED|None|1795378759|208\n2414|N/A|CANCELLED|JobHeldUser|1795379113|2414\n"
           "@@XHPC-SACCT\n208|COMPLETED|0:0|1795378759|1795378760|208|localhost\n"
           "2414|CANCELLED by 0|0:0|1795379113|1795379113|2414|None assigned\n"
           "239_[2]|CANCELLED by 0|0:0|1795382379|1795378783|239|None assigned\n")
    s = SlurmScheduler().parse_states(out)
    assert s[("208", 0)].status is Status.COMPLETED and s[("208", 0)].ended_at == 1795378760
    whole = s[("2414", ANY_TASK)]
    assert whole.status is Status.CANCELLED and whole.started_at is None and whole.ended_at == 1795379113
    assert s[("239", 2)].status is Status.CANCELLED and s[("239", 2)].started_at is None


def test_slurm_squeue_and_sacct_read_side_by_side_never_make_an_attempt_or_an_end() -> None:
    """squeue and sacct run at once, so one may answer from just before the other. Seen in CI:
    squeue listed an aftercorr array before Slurm split task 0 off (both tasks under the
    array's own id), sacct already had task 1 cancelled for its failed dependency under that
    id, not yet linked to its task: task 0 read as a second attempt, then CANCELLED."""
    unsplit = ("20506|0|PENDING|Dependency|1795812455|20506\n20506|1|PENDING|Dependency|1795812455|20506\n"
               "@@XHPC-SACCT\n20506|CANCELLED|0:0|1795812455|1795812455|20506|None assigned\n")
    s = SlurmScheduler().parse_states(unsplit)
    for task in (0, 1):  # alive in squeue: the record is read once accounting links it (next poll)
        assert (s[("20506", task)].status, s[("20506", task)].attempt) == (Status.PENDING, None)
    assert s.get(("20506", ANY_TASK)) is CANCELLED_BEFORE_START  # the unlinked record is no whole-array state
    no_squeue = ("@@XHPC-QUERY-FAILED squeue slurm_load_jobs error: Zero Bytes were transmitted or received\n"
                 "@@XHPC-SACCT\n20506|CANCELLED|0:0|1795812455|1795812455|20506|None assigned\n"
                 "20506_2|COMPLETED|0:0|1795812450|1795812452|20510|localhost\n")
    s = SlurmScheduler().parse_states(no_squeue)  # no squeue: an unlinked record names no task
    assert set(s) == {("20506", 2)}
    gone = ("@@XHPC-QUERY-FAILED squeue slurm_load_jobs error: Invalid job id specified\n"
            "@@XHPC-SACCT\n20506|CANCELLED|0:0|1795812455|1795812455|20506|None assigned\n")
    assert SlurmScheduler().parse_states(gone)[("20506", ANY_TASK)].status is Status.CANCELLED
    # A task of a second: squeue saw it pending, sacct saw it end. One run, not a requeue.
    quick = "21|0|PENDING|None|1795812455|21\n@@XHPC-SACCT\n21_0|COMPLETED|0:0|1795812455|1795812456|21|localhost\n"
    s = SlurmScheduler().parse_states(quick)
    assert (s[("21", 0)].status, s[("21", 0)].attempt, s[("21", 0)].previous_attempts) == (Status.COMPLETED, None, ())
    for how in ("REQUEUED", "PREEMPTED", "NODE_FAIL"):  # pending again after a run Slurm requeues
        again = (f"21|0|PENDING|BeginTime|1795812499|21\n@@XHPC-SACCT\n"
                 f"21_0|{how}|0:15|1795812455|1795812456|21|localhost\n")
        s = SlurmScheduler().parse_states(again)
        assert (s[("21", 0)].status, s[("21", 0)].attempt) == (Status.PENDING, 2), how


def test_slurm_a_stale_range_record_or_unstarted_end_never_ends_a_live_task() -> None:
    """Seen once in CI: task 0 of an aftercorr array read CANCELLED, unstarted, when Slurm
    cancelled task 1 for its failed dependency, and then ran. Accounting ended the array's
    range record, which still named task 0 after Slurm split it off. A range record is no task's
    that has its own or that squeue lists under another job id, and a task squeue lists queued
    or running never ended unstarted (such a record is newer than squeue's listing)."""
    queued = ("29131|1|CANCELLED|DependencyNeverSatisfied|1795821546|29131|\n"
              "29131|0|PENDING|Dependency|N/A|29132|\n@@XHPC-SACCT\n")
    for record in ("29131_[0-1]", "29131_0"):
        s = SlurmScheduler().parse_states(queued + f"{record}|CANCELLED|0:0|None|1795821546|29131|None assigned\n")
        assert (s[("29131", 0)].status, s[("29131", 0)].attempt) == (Status.PENDING, None), record
        if "[" in record:
            assert s[("29131", 1)].status is Status.CANCELLED
    # Then it runs: the stray record is no earlier attempt.
    running = ("29131|0|RUNNING|None|1795821547|29132|localhost\n@@XHPC-SACCT\n"
               "29131_0|CANCELLED|0:0|None|1795821546|29131|None assigned\n")
    s = SlurmScheduler().parse_states(running)
    assert (s[("29131", 0)].status, s[("29131", 0)].attempt, s[("29131", 0)].started_at) == (
        Status.RUNNING, None, 1795821547)
    # Slurm's own lines (22.05, raw sbatch, 2 rounds in 40): task 1 cancelled for its failed
    # dependency ends the array's range record for good, after task 0 was split off (30667).
    ghost = "30666_[0-1]|CANCELLED|0:0|1795824062|1795824062|30666|None assigned\n"
    ended = "30666|1|CANCELLED|DependencyNeverSatisfied|N/A|30666|\n"
    for task0, sacct, status in (
            ("30666|0|PENDING|Dependency|N/A|30667|", ghost, Status.PENDING),
            ("30666|0|COMPLETING|None|1795824063|30667|localhost", ghost, Status.RUNNING),
            ("30666|0|COMPLETED|None|1795824063|30667|localhost", ghost, Status.RUNNING),  # finishing
            ("30666|0|COMPLETED|None|1795824063|30667|localhost",
             "30666_0|COMPLETED|0:0|1795824063|1795824063|30667|localhost\n" + ghost, Status.COMPLETED)):
        s = SlurmScheduler().parse_states(f"{ended}{task0}\n@@XHPC-SACCT\n{sacct}")
        assert (s[("30666", 0)].status, s[("30666", 0)].attempt) == (status, None), task0
        assert s[("30666", 1)].status is Status.CANCELLED
    no_squeue = ("@@XHPC-QUERY-FAILED squeue Socket timed out\n@@XHPC-SACCT\n"
                 "30666_0|COMPLETED|0:0|1795824063|1795824063|30667|localhost\n" + ghost)
    assert SlurmScheduler().parse_states(no_squeue)[("30666", 0)].status is Status.COMPLETED
    # A cancel newer than squeue's listing is read once squeue lists the task ended too.
    cancelled = ("29131|0|CANCELLED|None|1795821550|29132|\n@@XHPC-SACCT\n"
                 "29131_0|CANCELLED by 0|0:0|None|1795821550|29132|None assigned\n")
    assert SlurmScheduler().parse_states(cancelled)[("29131", 0)].status is Status.CANCELLED
    # A run that started and ended (a task of a second) or was requeued still counts.
    for how, status, attempt in (("COMPLETED", Status.COMPLETED, None), ("NODE_FAIL", Status.PENDING, 2)):
        s = SlurmScheduler().parse_states(
            f"29131|0|PENDING|None|N/A|29132|\n@@XHPC-SACCT\n29131_0|{how}|0:0|1795821547|1795821548|29132|localhost\n")
        assert (s[("29131", 0)].status, s[("29131", 0)].attempt) == (status, attempt), how



def test_slurm_pending_tasks_listed_as_ranges_are_each_pending() -> None:
    """squeue without -r (issue 31: a watcher of held sweeps parsed 20,000 lines a cluster)
    lists the tasks still in the array's own record as one line of ranges, throttled or not;
    the tasks split off it keep a line each. Slurm's own lines (22.05, raw sbatch --hold)."""
    command = SlurmScheduler().query_command(["42396"])
    assert "SLURM_BITSTR_LEN=0" in command and " -r " not in command  # else ranges end in "..."
    out = ("42396|3|COMPLETED|None|1795834108|42397|localhost\n"
           "42396|5|RUNNING|None|1795834108|42398|localhost\n"
           "42396|0-2,4,6-99|PENDING|JobHeldUser|N/A|42396|\n"
           "42500|0-9%2|PENDING|JobArrayTaskLimit|N/A|42500|\n@@XHPC-SACCT\n"
           "42396_3|COMPLETED|0:0|1795834108|1795834109|42397|localhost\n")
    s = SlurmScheduler().parse_states(out)
    pending = [key for key, state in s.items() if state.status is Status.PENDING]
    assert sorted(pending) == sorted([("42396", t) for t in range(100) if t not in (3, 5)]
                                     + [("42500", t) for t in range(10)])
    assert s[("42396", 0)].message == "pending: JobHeldUser" and s[("42500", 9)].message == "pending: JobArrayTaskLimit"
    assert (s[("42396", 3)].status, s[("42396", 5)].status) == (Status.COMPLETED, Status.RUNNING)
    # A task in none of these lines left its array's own record without starting: cancelled.
    assert s[("42396", ANY_TASK)] is CANCELLED_BEFORE_START and s[("42500", ANY_TASK)] is CANCELLED_BEFORE_START
    split_off_only = "42396|5|RUNNING|None|1795834108|42398|localhost\n@@XHPC-SACCT\n"
    assert ("42396", ANY_TASK) not in SlurmScheduler().parse_states(split_off_only)  # nothing says so
    no_squeue = "@@XHPC-QUERY-FAILED squeue Socket timed out\n@@XHPC-SACCT\n"
    assert ("42396", ANY_TASK) not in SlurmScheduler().parse_states(no_squeue)


def test_slurm_a_task_cancelled_before_it_started_waits_for_accounting_as_pending() -> None:
    """squeue lists a task CANCELLED before sacct has its record. One that never ran (no node;
    squeue still gives it a start time, the moment it was cancelled) reads PENDING meanwhile:
    RUNNING made the store give it a start time, so a task Slurm cancelled for its failed
    dependency was never explained as such (seen in a fresh CI run). One that ran reads
    RUNNING until its exit code comes."""
    out = ("28096|1|CANCELLED|DependencyNeverSatisfied|1795818762|28096|\n"
           "28095|0|COMPLETED|None|1795818761|28098|localhost\n@@XHPC-SACCT\n")
    s = SlurmScheduler().parse_states(out)
    assert (s[("28096", 1)].status, s[("28096", 1)].message, s[("28096", 1)].started_at) == (
        Status.PENDING, "finishing (cancelled)", None)
    assert (s[("28095", 0)].status, s[("28095", 0)].message) == (Status.RUNNING, "finishing (completed)")


def test_cancel_commands_use_task_ranges() -> None:
    tasks = {"5": [4, 0, 1, 2], "6": list(range(1000))}
    assert SlurmScheduler().cancel_command(tasks) == "scancel 5_[0-2,4] 6_[0-999]"
    assert GridEngineScheduler().cancel_command({"7": [1, 2, 3, 9]}) == "qdel 7 -t 1-3 7 -t 9-9"
    sparse = SlurmScheduler().cancel_command({"8": list(range(0, 100000, 2))})  # 50,000 gaps
    assert max(len(word) for word in sparse.split()) < 8192 and max(len(line) for line in sparse.splitlines()) < 2**20


def test_long_command_runs_through_stdin(tmp_path: Path) -> None:
    """A command far over the 128 KiB argument cap runs (as a script fed on stdin), with
    its own stdin closed and its exit status kept."""
    from xhpc.transport import LocalTransport

    cluster = config.Cluster(name="t", scheduler="slurm", staging=str(tmp_path), local=True)
    words = " ".join(f"w{i}" for i in range(60000))  # ~400 KB
    result = LocalTransport(cluster).run(f"set -- {words}; echo \"$# $(cat | wc -c)\"; exit 3")
    assert (result.returncode, result.out.strip()) == (3, "60000 0"), result.err


def _run_live_tier(tmp_path: Path, env: dict[str, str], fake_runtime: bool) -> subprocess.CompletedProcess:
    """Run test_singularity_live in a child pytest with a PATH that has (a fake) apptainer or none."""
    import os
    import tempfile

    bindir = Path(tempfile.mkdtemp(dir=tmp_path, prefix="bin"))
    for tool in ("bash", "env"):
        (bindir / tool).symlink_to(shutil.which(tool))
    if fake_runtime:  # `apptainer exec IMAGE cmd...` runs cmd here
        (bindir / "apptainer").write_text('#!/bin/bash\nshift 2\nexec "$@"\n')
        (bindir / "apptainer").chmod(0o755)
    (bindir / "echo").symlink_to(shutil.which("echo"))
    child_env = {k: v for k, v in os.environ.items() if k not in ("XCORE_REQUIRE_INFRA", APPTAINER_ENV)}
    child_env.update(env, PATH=str(bindir))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider",
                           f"{__file__}::test_singularity_live"], capture_output=True, text=True, env=child_env,
                          cwd=Path(__file__).resolve().parents[3], timeout=300)


def test_apptainer_tier_skips_in_ci_only_with_its_reason_and_fails_when_required(tmp_path: Path) -> None:
    ci = _run_live_tier(tmp_path, {"XCORE_REQUIRE_INFRA": "1"}, fake_runtime=False)
    assert "1 skipped" in ci.stdout and APPTAINER_ENV in ci.stdout and "scripts/infra cannot install" in ci.stdout, \
        ci.stdout
    required = _run_live_tier(tmp_path, {"XCORE_REQUIRE_INFRA": "1", APPTAINER_ENV: "1"}, fake_runtime=False)
    assert required.returncode == 1 and "1 failed" in required.stdout and f"{APPTAINER_ENV}=1 but" in required.stdout, \
        required.stdout
    present = _run_live_tier(tmp_path, {APPTAINER_ENV: "1"}, fake_runtime=True)
    assert present.returncode == 0 and "1 passed" in present.stdout, present.stdout


def _run_gang_script(tmp_path: Path, roles: list[scripts.Role], job_id: int) -> list[int]:
    """Runs a gang's job.sh with stand-ins for scontrol and srun; gives each role's port, in order
    of the roles (whose frameworks differ)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho here\n")
    (bin_dir / "srun").write_text('#!/bin/sh\necho "$XHPC_FRAMEWORK $XHPC_PORT" >> "$PORTS_SEEN"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    seen = tmp_path / "ports"
    seen.unlink(missing_ok=True)
    script = tmp_path / "job.sh"
    script.write_text(scripts.launcher_script(Slurm(), "gang", str(tmp_path / "run"), roles))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": str(job_id), "SLURM_JOB_NODELIST": "here",
           "SLURM_TASKS_PER_NODE": "4", "SLURMD_NODENAME": "here", "PORTS_SEEN": str(seen)}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    ports = dict(line.split() for line in seen.read_text().splitlines())
    return [int(ports[role.framework or "none"]) for role in roles]


def test_an_automatic_coordinator_port_avoids_ephemeral_ports_and_ports_in_use(tmp_path: Path) -> None:
    """CI: jax's coordinator could not bind the port derived from the job id, 34308, which lies in
    the node's ephemeral range where any outgoing connection may hold it. The port now comes from
    below that range and steps past a port the node has in use."""
    import socket

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    roles = [scripts.role_of(Slurm(requirements=xm.JobRequirements(replicas=2), distributed="jax"), "main", 0),
             scripts.role_of(Slurm(distributed="torch"), "side", 1)]
    ports = _run_gang_script(tmp_path, roles, 4901)
    assert len(set(ports)) == 2 and all(20000 <= port < low for port in ports), (ports, low)
    assert _run_gang_script(tmp_path, roles, 4901) == ports, "the same job, the same ports"

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", ports[0]))
        holder.listen()
        moved = _run_gang_script(tmp_path, roles, 4901)
    assert moved[0] != ports[0] and 20000 <= moved[0] < low and moved[0] != moved[1], (moved, ports)
