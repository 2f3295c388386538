"""``depends_on`` on real schedulers, waited for natively: Slurm ``--dependency`` (``afterok``,
``aftercorr``, ``--kill-on-invalid-dep=yes``) and Grid Engine ``-hold_jid_ad``. Each job notes
when it started and ended in a file (the same file system here), so the order is proven by
the jobs' own clocks."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import xcore as xm
from xhpc.schedulers import Chunk


def _on(scheduler: str) -> pytest.MarkDecorator:
    """The test runs on one real scheduler, from the login node (``cluster`` fixture)."""
    def mark(test):  # type: ignore[no-untyped-def]
        test = pytest.mark.parametrize("cluster", [(scheduler, "local")], indirect=True,
                                       ids=[f"{scheduler}-login"])(test)
        return pytest.mark.infra(scheduler)(test)
    return mark  # type: ignore[return-value]


SLURM, SGE = _on("slurm"), _on("sge")


def _step(out: Path) -> list[str]:
    """A command: ``NAME SECS CODE``: notes its start, sleeps, notes its end, exits CODE."""
    note = f'>> {out}'
    return [f'echo "$1 start $(date +%s.%N)" {note}; sleep "$2"; echo "$1 end $(date +%s.%N)" {note}; exit "$3"']


def _times(out: Path) -> dict[tuple[str, str], float]:
    found = {}
    for line in out.read_text().splitlines():
        name, what, at = line.split()
        found[(name, what)] = float(at)
    return found


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


def _request(job_id: int, depends_on=()):  # type: ignore[no-untyped-def]
    """A request as the plan reads it: its id and dependencies (executable and executor unused)."""
    from xcore.plugin import LaunchRequest

    return LaunchRequest(job_id, 1, job_id, "job", None, None, [], {}, depends_on=tuple(depends_on))  # type: ignore[arg-type]


def _handle(job: str, task: int):  # type: ignore[no-untyped-def]
    from xhpc.handles import SlurmHandle

    return SlurmHandle(cluster="c", job_id=job, task=task, index=task, run_dir="/r")


def test_the_plan_pairs_task_for_task_else_submits_each_dependent_with_its_own():
    from xcore.model.dependencies import Dependency
    from xhpc.launch import _dependency_plan
    from xhpc.schedulers import SCHEDULERS

    slurm, sge = SCHEDULERS["slurm"], SCHEDULERS["sge"]
    paired = [_request(10 + i, [Dependency(i, _handle("77", i), "success", f"1/{i}")]) for i in range(3)]
    assert _dependency_plan(slurm, paired, [0, 1, 2], {}, 1000) == [([0, 1, 2], "aftercorr:77")]
    assert _dependency_plan(slurm, paired, [0, 1, 2], {}, 2) == [  # too big for one array: each alone
        ([0], "afterok:77_0"), ([1], "afterok:77_1"), ([2], "afterok:77_2")]
    crossed = [paired[1], paired[0]]
    assert _dependency_plan(slurm, crossed, [0, 1], {}, 1000) == [([0], "afterok:77_1"), ([1], "afterok:77_0")]
    both = _request(20, [Dependency(1, _handle("5", 0), "success", "1/1"),
                         Dependency(2, None, "finished", "1/2")])
    assert _dependency_plan(slurm, [both], [4], {2: _handle("6", 3)}, 1000) == [([4], "afterok:5_0,afterany:6_3")]
    assert _dependency_plan(slurm, [both], [4], {}, 1000) == [([4], "!dependency 1/2 was not submitted")]
    finished = [_request(10 + i, [Dependency(i, _handle("8", 1 + i), "finished", f"1/{i}")]) for i in range(2)]
    assert _dependency_plan(sge, finished, [0, 1], {}, 1000) == [([0, 1], "-hold_jid_ad 8")]
    assert "--dependency=aftercorr:77 --kill-on-invalid-dep=yes" in slurm.submit_command(
        "job.sh", Chunk(0, 0, 3), None, "aftercorr:77")


@SLURM
def test_slurm_a_dependent_starts_after_success_and_never_runs_after_a_failure(cluster, tmp_path):
    import xhpc

    out = tmp_path / "times.txt"
    with xm.create_experiment("chain") as e:
        [exe] = e.package([xm.Packageable(xhpc.Command(_step(out)), xhpc.Slurm.Spec())])
        good = e.add(xm.Job(exe, xhpc.Slurm(), args=["A", 1, 0]))
        after_good = e.add(xm.Job(exe, xhpc.Slurm(), args=["B", 0, 0]), depends_on=[good])
        bad = e.add(xm.Job(exe, xhpc.Slurm(), args=["F", 0, 3]))
        after_bad = e.add(xm.Job(exe, xhpc.Slurm(), args=["G", 0, 0]), depends_on=[bad])
    jobs = {j.work_unit_id: j for j in e.wait_until_complete(timeout=150)}
    t = _times(out)
    assert jobs[after_good.unit.work_unit_id].status is xm.Status.COMPLETED
    assert t[("A", "end")] <= t[("B", "start")]
    never = jobs[after_bad.unit.work_unit_id]
    assert (never.status, never.message) == (xm.Status.CANCELLED, f"dependency {e.experiment_id}/3 failed")
    assert ("G", "start") not in t
    # Slurm cancelled it unstarted (kill_invalid_depend). Its record is the array's own (JobIDRaw
    # the array's id: task 0 was split off under an id of its own), labelled "<id>_1", "<id>" until
    # accounting links it, or "<id>_[0-1]" when accounting kept the range (2 raw rounds in 40).
    array = never.handle["job_id"]
    accounted = subprocess.run(["sacct", "-n", "-X", "-P", "-j", array, "-o", "JobIDRaw,JobID,State,NodeList"],
                               capture_output=True, text=True, check=True).stdout
    records = [line.split("|") for line in accounted.splitlines()]
    assert [(state, node) for raw, _, state, node in records if raw == array] == [
        ("CANCELLED", "None assigned")], accounted


@SLURM
def test_slurm_evals_paired_with_trainings_by_aftercorr_each_after_its_own(cluster, tmp_path):
    """20 trainings and 20 evaluations, eval i on training i: one array each, paired by
    ``aftercorr``; the launcher exits at once. The last training is long, the others short:
    each evaluation starts after its own training, the others' long before the last one ends
    (two free slots of the shared cluster are enough)."""
    out = tmp_path / "times.txt"
    script = tmp_path / "launch.py"
    script.write_text(f"""
import xcore as xm, xhpc
with xm.create_experiment("train, then eval") as e:
    [train, evaluate] = e.package([xm.Packageable(xhpc.Command({_step(out)!r}), xhpc.Slurm.Spec()),
                                   xm.Packageable(xhpc.Command({_step(out)!r} + ["#eval"]), xhpc.Slurm.Spec())])
    trainings = [e.add(xm.Job(train, xhpc.Slurm(), args=[f"T{{i}}", 8 if i == 19 else 0.1, 0])) for i in range(20)]
    for i, trained in enumerate(trainings):
        e.add(xm.Job(evaluate, xhpc.Slurm(), args=[f"E{{i}}", 0, 0]), depends_on=[trained])
""")
    started = time.monotonic()
    launched = _cli("launch", str(script))
    assert launched.returncode == 0, launched.stderr
    assert time.monotonic() - started < 6, "the launcher must exit right after submitting"
    assert "submitted 20 tasks" in launched.stderr and launched.stderr.count("as slurm job") == 2  # two arrays
    waited = _cli("wait", "1", "--timeout", "150")
    assert waited.returncode == 0, waited.stderr
    t = _times(out)
    assert all(t[(f"T{i}", "end")] <= t[(f"E{i}", "start")] for i in range(20))
    assert all(t[(f"E{i}", "start")] < t[("T19", "end")] for i in range(19))  # not after all of them


@SGE
def test_grid_engine_pairs_task_for_task_with_hold_jid_ad(cluster, tmp_path):
    import xhpc

    out = tmp_path / "times.txt"
    with xm.create_experiment("sge pairs") as e:
        [exe] = e.package([xm.Packageable(xhpc.Command(_step(out)), xhpc.GridEngine.Spec())])
        trainings = [e.add(xm.Job(exe, xhpc.GridEngine(), args=[f"T{i}", 6 if i == 3 else 0.1, 0])) for i in range(4)]
        evals = [e.add(xm.Job(exe, xhpc.GridEngine(), args=[f"E{i}", 0, 0]), depends_on=[trained], when="finished")
                 for i, trained in enumerate(trainings)]
    jobs = e.wait_until_complete(timeout=150)
    assert all(j.status is xm.Status.COMPLETED for j in jobs)
    arrays = {j.handle["job_id"] for j in jobs if j.work_unit_id in {f.unit.work_unit_id for f in evals}}
    assert len(arrays) == 1  # the evaluations are one array job, held task for task
    t = _times(out)
    assert all(t[(f"T{i}", "end")] <= t[(f"E{i}", "start")] for i in range(4))
    assert all(t[(f"E{i}", "start")] < t[("T3", "end")] for i in range(3))  # each on its own, not on T3
