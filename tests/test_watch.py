"""``xcore watch``: one observer that relaunches retries nobody else is watching, and ends
cleanly on SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import xcore as xm
from core_helpers import _FAKE_CLI
from xcore.cli import watch
from xcore.cli.main import main
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.model.status import JobState, Status
from xcore.testing import fake, plugin_host


def test_a_watch_cycle_relaunches_a_preempted_job(capsys):
    plugin_host({"fake": fake})
    with xm.create_experiment("watched") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    jobs = [j for u in open_store().work_units(experiment.experiment_id) for j in u.jobs]
    fake.preempt(get_host().serializer.load(jobs[0].handle))
    assert main(["watch", "--once"]) == 0
    err = capsys.readouterr().err
    assert "1 active experiment, 2 active jobs on 1 backend kind, 2 changed, 1 retried" in err
    assert "stopped after 1 cycle" in err
    assert [j.attempt for u in open_store().work_units(experiment.experiment_id) for j in u.jobs] == [2, 1]


def test_watch_stops_cleanly_on_sigterm():
    watcher = subprocess.Popen([sys.executable, "-c", _FAKE_CLI, "watch", "--interval", "0.2"],
                               stderr=subprocess.PIPE, text=True)
    assert watcher.stderr is not None
    first = watcher.stderr.readline()  # the first cycle's line: it is watching
    assert "xcore watch:" in first and "active experiment" in first, first
    watcher.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    while watcher.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watcher.returncode == 0
    assert "stopped after" in watcher.stderr.read()


def test_a_bad_interval_is_refused(capsys):
    assert main(["watch", "--interval", "0"]) == 1
    assert "--interval must be" in capsys.readouterr().err


def _watched(experiments: int, jobs: int) -> list[int]:
    ids = []
    for _ in range(experiments):
        with xm.create_experiment("watched") as experiment:
            [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
            for _ in range(jobs):
                experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
        ids.append(experiment.experiment_id)
    return ids


def _count_queries(monkeypatch) -> list[list[str]]:
    """Each backend query a cycle sends: the records of the handles it asks about."""
    host, asked = get_host(), []
    job_states, load = host.job_states, host.serializer.load

    def counted(kind, handles):
        asked.append([h.record for h in handles])
        return job_states(kind, handles)

    monkeypatch.setattr(host, "job_states", counted)
    monkeypatch.setattr(host.serializer, "load", lambda stored: asked.append(["load"]) or load(stored))
    return asked


def test_one_backend_query_per_cycle_for_many_experiments(monkeypatch):
    plugin_host({"fake": fake})
    _watched(12, 5)
    asked = _count_queries(monkeypatch)
    handles = watch.Watched()
    for _ in range(3):
        asked.clear()
        assert watch.cycle(handles).startswith("12 active experiments, 60 active jobs on 1 backend kind")
        queries = [records for records in asked if records != ["load"]]
        assert len(queries) == 1 and len(set(queries[0])) == 60  # every experiment's jobs in one query


def test_a_watcher_loads_each_handle_once_across_cycles(monkeypatch):
    plugin_host({"fake": fake})
    _watched(3, 4)
    asked = _count_queries(monkeypatch)
    handles = watch.Watched()
    for _ in range(3):
        watch.cycle(handles)
    assert asked.count(["load"]) == 12  # rebuilt once, not once per cycle


def test_a_watcher_asks_about_a_job_relaunched_elsewhere_with_its_new_handle(monkeypatch):
    plugin_host({"fake": fake})
    [experiment_id] = _watched(1, 2)
    mine = watch.Watched()
    watch.cycle(mine)
    jobs = [j for u in open_store().work_units(experiment_id) for j in u.jobs]
    fake.preempt(get_host().serializer.load(jobs[0].handle))
    watch.cycle(watch.Watched())  # another watcher relaunches it: a new attempt, a new handle
    relaunched = [j for u in open_store().work_units(experiment_id) for j in u.jobs][0]
    assert relaunched.attempt == 2 and relaunched.handle != jobs[0].handle
    asked = _count_queries(monkeypatch)
    watch.cycle(mine)
    [query] = [records for records in asked if records != ["load"]]
    assert get_host().serializer.load(relaunched.handle).record in query
    assert get_host().serializer.load(jobs[0].handle).record not in query


def _same_objects(monkeypatch) -> None:
    """The fake backend answering with the same state objects while nothing changed, as xhpc
    does for an unchanged scheduler output (``xhpc.answers``)."""
    host, said = get_host(), {}
    job_states = host.job_states

    def remembered(kind, handles):
        states = job_states(kind, handles)
        return [said.setdefault((handle.record, state), state) for handle, state in zip(handles, states, strict=True)]

    monkeypatch.setattr(host, "job_states", remembered)


def _reads_and_work(monkeypatch) -> list[str]:
    """What a cycle reads of the job rows, and each job it compares with its backend's state."""
    from xcore.runtime import tracking

    done: list[str] = []
    store = open_store()
    for name in ("active_jobs", "active_jobs_among", "active_job_versions"):
        read = getattr(type(store), name)
        monkeypatch.setattr(type(store), name,
                            lambda self, *a, _read=read, _name=name, **k: done.append(_name) or _read(self, *a, **k))
    times = tracking.recorded_times
    monkeypatch.setattr(tracking, "recorded_times", lambda *a: done.append("job") or times(*a))
    return done


def test_a_cycle_after_which_nothing_changed_reads_no_job_row_and_compares_no_job(monkeypatch):
    plugin_host({"fake": fake})
    _watched(3, 4)
    _same_objects(monkeypatch)
    kept = watch.Watched()
    watch.cycle(kept)  # every job read, its first state recorded
    watch.cycle(kept)  # the rows it wrote read again
    done = _reads_and_work(monkeypatch)
    assert watch.cycle(kept).startswith("3 active experiments, 12 active jobs")
    assert done == []  # no row read, no job compared: the cycle's cost follows what changed
    fresh = watch.cycle(watch.Watched())  # a new watcher reads and compares every job
    assert fresh.startswith("3 active experiments, 12 active jobs") and done.count("job") == 12


def test_a_watcher_sees_what_another_process_changed(monkeypatch):
    from core_helpers import run_xcore_fake

    plugin_host({"fake": fake})
    first, second = _watched(2, 3)
    _same_objects(monkeypatch)
    kept = watch.Watched()
    for _ in range(2):
        watch.cycle(kept)
    cancelled = run_xcore_fake("cancel", str(first))
    assert cancelled.returncode == 0, cancelled.stderr
    assert watch.cycle(kept).startswith("1 active experiment, 3 active jobs")
    assert {job.experiment_id for job in kept.records.values()} == {second}
    job = open_store().active_jobs([second])[0]
    done = _reads_and_work(monkeypatch)
    open_store().record_states([(job.id, JobState(Status.PENDING, "pending: moved by hand"))])  # another writer
    watch.cycle(kept)
    assert done.count("active_jobs_among") == 1 and done.count("job") == 1  # that one row read and compared again
    assert kept.records[job.id].message != "pending: moved by hand"  # the backend's word recorded again


def test_a_backend_out_of_reach_for_one_cycle_leaves_the_store_as_it_was(monkeypatch):
    from xcore.errors import XcoreError

    plugin_host({"fake": fake})
    [experiment_id] = _watched(1, 3)
    _same_objects(monkeypatch)
    kept, host = watch.Watched(), get_host()
    for _ in range(2):
        watch.cycle(kept)
    answering = host.job_states

    def refused(kind, handles):
        raise XcoreError("the backend refused. Try later.")

    monkeypatch.setattr(host, "job_states", refused)
    assert watch.cycle(kept).endswith("3 changed, 0 retried")  # UNKNOWN in memory only
    monkeypatch.setattr(host, "job_states", answering)
    events = sum(len(open_store().job_history(job.id)) for job in open_store().active_jobs([experiment_id]))
    assert watch.cycle(kept).endswith("0 changed, 0 retried")  # the records read again: nothing to record
    assert Status.UNKNOWN not in {job.status for job in kept.records.values()}
    assert sum(len(open_store().job_history(job.id)) for job in open_store().active_jobs([experiment_id])) == events
