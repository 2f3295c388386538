"""``experiment.add(..., depends_on=...)`` on the fake backend, which cannot wait natively: the
dependent is held (PENDING, not submitted) and an observer releases it once, or cancels it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

import xcore as xm
from core_helpers import run_xcore_fake, write_fake_script
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.model.status import Status
from xcore.runtime import dependents
from xcore.runtime.tracking import refresh_jobs
from xcore.testing import fake, plugin_host

APPEND = "import sys; open(sys.argv[1], 'a').write('ran\\n')"


@pytest.fixture(autouse=True)
def fake_backend() -> None:
    plugin_host({"fake": fake})


def _jobs(experiment_id: int) -> dict[int, object]:
    return {u.id: u.jobs[0] for u in open_store().work_units(experiment_id)}


def _finish(job, status: Status, code: int) -> None:
    fake.set_state(get_host().serializer.load(job.handle), status, f"exit code {code}", code)


def test_a_held_dependent_waits_unsubmitted_then_runs_once_its_dependency_completed(tmp_path):
    marker = tmp_path / "ran.txt"
    with xm.create_experiment("held") as e:
        [exe] = e.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", APPEND])])
        train = e.add(xm.Job(exe, fake.FakeExecutor(hold=True), args=[str(tmp_path / "a")]))
        e.add(xm.Job(exe, fake.FakeExecutor(), args=[str(marker)]), depends_on=[train])
    jobs = _jobs(e.experiment_id)
    assert (jobs[2].status, jobs[2].message, jobs[2].handle) == (Status.PENDING, f"waiting for {e.experiment_id}/1",
                                                                 None)
    refresh_jobs(open_store(), get_host(), list(jobs.values()))  # nothing ended: still held
    assert not marker.exists() and _jobs(e.experiment_id)[2].handle is None
    _finish(jobs[1], Status.COMPLETED, 0)
    refresh_jobs(open_store(), get_host(), list(jobs.values()))
    assert marker.read_text() == "ran\n" and _jobs(e.experiment_id)[2].handle is not None


def test_a_failed_or_cancelled_dependency_cancels_the_held_chain_with_the_reason(tmp_path):
    with xm.create_experiment("chain") as e:
        [exe] = e.package([xm.binary(fake.FakeSpec(), "true")])
        a = e.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
        b = e.add(xm.Job(exe, fake.FakeExecutor()), depends_on=[a])
        e.add(xm.Job(exe, fake.FakeExecutor()), depends_on=[b])
        x = e.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
        e.add(xm.Job(exe, fake.FakeExecutor()), depends_on=[x])
    jobs = _jobs(e.experiment_id)
    _finish(jobs[1], Status.FAILED, 3)
    refresh_jobs(open_store(), get_host(), list(jobs.values()))
    x.unit.stop()  # cancelling a unit cancels what waits on it
    refresh_jobs(open_store(), get_host(), list(_jobs(e.experiment_id).values()))
    after = _jobs(e.experiment_id)
    xid = e.experiment_id
    assert [(after[u].status, after[u].message) for u in (2, 3, 5)] == [
        (Status.CANCELLED, f"dependency {xid}/1 failed"), (Status.CANCELLED, f"dependency {xid}/2 cancelled"),
        (Status.CANCELLED, f"dependency {xid}/4 cancelled")]
    assert all(after[u].handle is None for u in (2, 3, 5))  # never submitted


def test_when_finished_runs_after_a_failure_and_a_dependency_already_ended_is_not_waited_for():
    with xm.create_experiment("finished") as e:
        [exe] = e.package([xm.binary(fake.FakeSpec(), "false")])
        failing = e.add(xm.Job(exe, fake.FakeExecutor()))
        failing.result()
    jobs = refresh_jobs(open_store(), get_host(), list(_jobs(e.experiment_id).values()))
    assert jobs[0].status is Status.FAILED
    with xm.create_experiment("after") as later:  # a unit of another experiment, already ended
        [exe] = later.package([xm.binary(fake.FakeSpec(), "true")])
        anyway = later.add(xm.Job(exe, fake.FakeExecutor()), depends_on=[failing], when="finished")
        never = later.add(xm.Job(exe, fake.FakeExecutor()), depends_on=[failing])
    assert _jobs(later.experiment_id)[anyway.unit.work_unit_id].handle is not None  # submitted at once
    job = _jobs(later.experiment_id)[never.unit.work_unit_id]
    assert (job.status, job.message) == (Status.CANCELLED, f"dependency {e.experiment_id}/1 failed")


def test_a_job_of_a_group_can_be_depended_on_alone():
    with xm.create_experiment("group") as e:
        [exe] = e.package([xm.binary(fake.FakeSpec(), "true")])
        group = e.add(xm.JobGroup(train=xm.Job(exe, fake.FakeExecutor(hold=True)),
                                  ps=xm.Job(exe, fake.FakeExecutor(hold=True))))
        e.add(xm.Job(exe, fake.FakeExecutor()), depends_on=[group.unit.job("train")])
        with pytest.raises(ValueError, match="has no job 'eval'"):
            group.unit.job("eval")
    jobs = {j.name: j for j in open_store().work_units(e.experiment_id, [1])[0].jobs}
    assert open_store().dependencies(e.experiment_id)[0].on_job == "train"
    fake.set_state(get_host().serializer.load(jobs["train"].handle), Status.COMPLETED, "exit code 0", 0)
    refresh_jobs(open_store(), get_host(), [j for u in open_store().work_units(e.experiment_id) for j in u.jobs])
    assert _jobs(e.experiment_id)[2].handle is not None  # "ps" still runs: only "train" was waited for


def test_bad_entries_and_cycles_are_refused_at_add_and_record_nothing():
    with pytest.raises(xm.ExperimentUnitError):  # the never-launched first add fails the block at its end
        with xm.create_experiment("refused") as e:
            [exe] = e.package([xm.binary(fake.FakeSpec(), "true")])
            with pytest.raises(TypeError, match=r"depends_on takes work units.*got str"):
                e.add(xm.Job(exe, fake.FakeExecutor()), depends_on=["1/1"])
            with pytest.raises(ValueError, match="when='always'"):
                e.add(xm.Job(exe, fake.FakeExecutor()), depends_on=[], when="always")
            # A unit added again under its identity (it never reached a backend) may not wait on
            # a unit that waits on it.
            a = e.add(xm.Job(exe, fake.FakeExecutor(fail_launch="no capacity")), identity="a")
            with pytest.raises(xm.ExperimentUnitError, match="no capacity"):
                a.result()
            b = e.add(xm.Job(exe, fake.FakeExecutor(hold=True)), depends_on=[a], identity="b")
            with pytest.raises(ValueError, match=r"cycle \(\d+/1 -> \d+/2 -> \d+/1\)"):
                e.add(xm.Job(exe, fake.FakeExecutor()), identity="a", depends_on=[b])
    assert [u.id for u in open_store().work_units(e.experiment_id)] == [1, 2]
    assert open_store().dependencies(e.experiment_id, [1]) == []


def _observer(env: dict[str, str], experiment_id: int) -> subprocess.Popen[str]:
    code = ("import sys\nfrom xcore.testing import fake, plugin_host\nplugin_host({'fake': fake}, entry_points=True)\n"
            "from xcore.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")
    return subprocess.Popen([sys.executable, "-c", code, "wait", str(experiment_id), "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_three_concurrent_observers_release_a_held_dependent_exactly_once(tmp_path):
    import os

    marker = tmp_path / "ran.txt"
    script = write_fake_script(tmp_path / "launch.py", f"""
with xm.create_experiment("observed") as e:
    [exe] = e.package([xm.binary(fake.FakeSpec(), {sys.executable!r}, args=["-c", {APPEND!r}])])
    first = e.add(xm.Job(exe, fake.FakeExecutor(hold=True), args=[{str(tmp_path / 'first')!r}]))
    e.add(xm.Job(exe, fake.FakeExecutor(), args=[{str(marker)!r}]), depends_on=[first])
""")
    assert run_xcore_fake("launch", str(script)).returncode == 0  # the launcher is gone
    observers = [_observer(dict(os.environ), 1) for _ in range(3)]  # `xcore wait`, three at once
    _finish(_jobs(1)[1], Status.COMPLETED, 0)
    outs = [p.communicate(timeout=120) for p in observers]
    assert [p.returncode for p in observers] == [0, 0, 0], outs
    assert marker.read_text() == "ran\n"  # submitted by one observer only
    assert open_store().held_states([(1, 2)]) == {(1, 2): "released"}


def test_observers_in_threads_claim_once_at_the_same_instant(tmp_path, monkeypatch):
    """Three observers that all decided to release the unit claim it at once: one submits."""
    marker = tmp_path / "ran.txt"
    with xm.create_experiment("threads") as e:
        [exe] = e.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", APPEND])])
        first = e.add(xm.Job(exe, fake.FakeExecutor(hold=True), args=[str(tmp_path / "first")]))
        e.add(xm.Job(exe, fake.FakeExecutor(), args=[str(marker)]), depends_on=[first])
    _finish(_jobs(e.experiment_id)[1], Status.COMPLETED, 0)
    refresh_jobs(open_store(), get_host(), [_jobs(e.experiment_id)[1]])  # recorded; no held job seen: not released
    barrier = threading.Barrier(3)
    real = dependents._verdict

    def together(store, edges):
        verdict = real(store, edges)
        barrier.wait(timeout=60)
        return verdict

    monkeypatch.setattr(dependents, "_verdict", together)
    threads = [threading.Thread(target=dependents.check_held, args=(open_store(), get_host(), [(e.experiment_id, 2)]))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert Path(marker).read_text() == "ran\n"


def test_cancelling_a_held_unit_keeps_it_and_what_waits_on_it_from_ever_running(tmp_path):
    marker = tmp_path / "ran.txt"
    with xm.create_experiment("cancel held") as e:
        [exe] = e.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", APPEND])])
        first = e.add(xm.Job(exe, fake.FakeExecutor(hold=True), args=[str(tmp_path / "first")]))
        held = e.add(xm.Job(exe, fake.FakeExecutor(), args=[str(marker)]), depends_on=[first])
        e.add(xm.Job(exe, fake.FakeExecutor(), args=[str(marker)]), depends_on=[held])
    assert run_xcore_fake("cancel", f"{e.experiment_id}/2").returncode == 0
    _finish(_jobs(e.experiment_id)[1], Status.COMPLETED, 0)
    refresh_jobs(open_store(), get_host(), list(_jobs(e.experiment_id).values()))
    after = _jobs(e.experiment_id)
    assert [(after[u].status, after[u].message) for u in (2, 3)] == [
        (Status.CANCELLED, dependents.CANCELLED_HELD),
        (Status.CANCELLED, f"dependency {e.experiment_id}/2 cancelled")]
    assert not marker.exists()


def test_show_and_the_dashboard_say_what_a_held_unit_waits_for(capsys):
    from starlette.testclient import TestClient  # xcore-core[ui], installed by scripts/test.sh

    from xcore.cli.main import main
    from xcore.ui.app import create_app

    with xm.create_experiment("shown") as e:
        [exe] = e.package([xm.binary(fake.FakeSpec(), "true")])
        first = e.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
        e.add(xm.Job(exe, fake.FakeExecutor()), depends_on=[first], when="finished")
    xid = e.experiment_id
    assert main(["show", str(xid)]) == 0
    out = capsys.readouterr().out
    assert f"waiting for {xid}/1" in out
    assert out.splitlines()[-2:] == ["WU  DEPENDS ON  WHEN", f"2   {xid}/1         finished"]
    page = TestClient(create_app(open_store(), get_host()), base_url="http://127.0.0.1").get(
        f"/experiments/{xid}/units/2").text
    assert f'<a href="/experiments/{xid}/units/1">{xid}/1</a> (to end)' in page


def test_a_job_generator_takes_no_depends_on_and_the_refusal_uses_no_unit_id():
    async def generator(unit):  # pragma: no cover - refused before it runs
        pass

    with xm.create_experiment("generator") as e:
        [exe] = e.package([xm.binary(fake.FakeSpec(), "true")])
        first = e.add(xm.Job(exe, fake.FakeExecutor()))
        with pytest.raises(ValueError, match="not to a job generator"):
            e.add(generator, depends_on=[first])
        second = e.add(xm.Job(exe, fake.FakeExecutor()), depends_on=[first])
    assert second.unit.work_unit_id == 2 and len(e.work_units) == 2


def test_a_cancelled_sweep_without_dependencies_costs_the_observer_no_job_reads(monkeypatch):
    """Cancelling a sweep ends all its jobs at once: the duty that explains native dependency
    cancels must not read every unit's jobs when none of them waited for anything (a 100,000-task
    `xcore cancel` spent 5 s there)."""
    with xm.create_experiment("sweep") as e:
        [exe] = e.package([xm.binary(fake.FakeSpec(), "true")])
        for _ in range(30):
            e.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    store = open_store()
    jobs = list(_jobs(e.experiment_id).values())
    for job in jobs:
        fake.set_state(get_host().serializer.load(job.handle), Status.CANCELLED, "cancelled", None)
    reads = []
    original = type(store).work_units
    monkeypatch.setattr(type(store), "work_units", lambda self, *a, **k: reads.append(a) or original(self, *a, **k))
    refresh_jobs(store, get_host(), jobs)
    assert reads == [], "the dependency duty read the jobs of units that wait for nothing"
    assert all(j.status is Status.CANCELLED for j in _jobs(e.experiment_id).values())
