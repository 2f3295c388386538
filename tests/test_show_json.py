"""``xcore show --json`` writes a sweep's shared executor and executable once, not per job."""

from __future__ import annotations

import json

import xcore as xm
from xcore.cli.main import main
from xcore.testing import fake, plugin_host


def test_shared_executor_and_executable_are_one_table_entry_each(xcore_home, capsys):
    plugin_host({"fake": fake})
    with xm.create_experiment("shared") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        executor = fake.FakeExecutor(hold=True)
        for i in range(20):
            experiment.add(xm.Job(exe, executor, args={"i": i}))
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True, fail_launch="")))  # equal content: same entry
    capsys.readouterr()
    assert main(["show", str(experiment.experiment_id), "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    jobs = [job for unit in data["work_units"] for job in unit["jobs"]]
    assert len(jobs) == 21
    assert list(data["executors"]) == ["1"] and list(data["executables"]) == ["1"]
    assert data["executors"]["1"]["hold"] is True
    assert all(job["executor_id"] == "1" and job["executable_id"] == "1" for job in jobs)
    assert not any("executor" in job or "executable" in job for job in jobs)
    assert out.count('"hold"') == 1


def _three_job_experiment() -> int:
    """A 3-job experiment written straight into the store, every time fixed, so its JSON is one
    exact document: two jobs share an executor and the executable, one has its own executor."""
    import sqlite3

    from xcore import paths
    from xcore.model.status import JobState, Status
    from xcore.store.records import NewJob
    from xcore.store.sqlite import open_url

    store = open_url(paths.store_url())
    experiment = store.create_experiment("three «jobs»", tags=["a", "b"], notes="n", user="ann", host="box")
    shared = {"kind": "test.Exec", "cpus": 2, "extra": {"z": 1, "a": "é"}}
    executable = {"kind": "test.Binary", "path": "/bin/true"}
    ids = []
    executors = (shared, dict(reversed(list(shared.items()))), {"kind": "test.Exec", "cpus": 4})
    for unit, executor in enumerate(executors, start=1):
        args = {"lr": 0.1 * unit, "name": f"ü{unit}"}
        ids += store.add_work_unit(experiment.id, unit, "work_unit", args, f"id{unit}",
                                   [NewJob("main", "test.Exec", executor, executable, ["--x", "1"], {"K": "v"})])
    store.mark_launched([(ids[0], "test.Handle", {"kind": "test.Handle", "n": 1}, "/logs/1")])
    store.record_states([(ids[0], JobState(Status.COMPLETED, exit_code=0, started_at=100.0, ended_at=160.5)),
                         (ids[1], JobState(Status.FAILED, "boom", exit_code=3, started_at=101.0, ended_at=102.0)),
                         (ids[2], JobState(Status.CANCELLED, "cancelled"))])
    store.record_results(ids[0], {"loss": 0.25}, final=True)
    store.record_links([(ids[1], "tb", "http://t/2")])
    store.close()
    db = sqlite3.connect(paths.store_url().removeprefix("sqlite:///"))
    with db:
        db.execute("UPDATE experiments SET created_at = 1000.0")
        db.execute("UPDATE jobs SET created_at = 1001.0, launched_at = CASE WHEN launched_at IS NULL THEN NULL"
                   " ELSE 1002.0 END,"
                   " ended_at = CASE WHEN status = 'CANCELLED' THEN 200.0 ELSE ended_at END")
    db.close()
    return experiment.id


EXPECTED_THREE_JOBS = (
    '{"id": 1, "title": "three «jobs»", "tags": ["a", "b"], "notes": "n", "script_path": null, "script_sha256": null,'
    ' "git_commit": null, "git_dirty": null, "user": "ann", "host": "box", "created_at": 1000.0,'
    ' "launch_status": "LAUNCHING", "launch_error": "", "status_counts": {"CANCELLED": 1, "COMPLETED": 1, "FAILED": 1},'
    ' "unreadable": "", "status": "FAILED", "work_unit_count": 3,'
    ' "usage": {"cpu_hours": 0.017083, "gpu_hours": 0.0, "tpu_hours": 0.0, "cost": null},'
    ' "notifications": {"failed": 0, "retrying": 0}, "work_units": ['
    '{"id": 1, "role": "work_unit", "args": {"lr": 0.1, "name": "ü1"}, "identity": "id1", "status": "COMPLETED",'
    ' "exit_codes": [0], "duration": 60.5, "started_at": 100.0, "ended_at": 160.5, "jobs": ['
    '{"id": 1, "experiment_id": 1, "work_unit_id": 1, "name": "main", "executor_kind": "test.Exec",'
    ' "args": ["--x", "1"], "env": {"K": "v"}, "status": "COMPLETED", "message": "", "exit_code": 0,'
    ' "handle_kind": "test.Handle", "handle": {"kind": "test.Handle", "n": 1}, "log_path": "/logs/1",'
    ' "created_at": 1001.0, "launched_at": 1002.0, "started_at": 100.0, "ended_at": 160.5, "duration": 60.5,'
    ' "executor_id": "1", "executable_id": "1"}], "results": {"loss": 0.25}, "links": {},'
    ' "usage": {"cpu_hours": 0.016806, "gpu_hours": 0.0, "tpu_hours": 0.0, "cost": null}}, '
    '{"id": 2, "role": "work_unit", "args": {"lr": 0.2, "name": "ü2"}, "identity": "id2", "status": "FAILED",'
    ' "exit_codes": [3], "duration": 1.0, "started_at": 101.0, "ended_at": 102.0, "jobs": ['
    '{"id": 2, "experiment_id": 1, "work_unit_id": 2, "name": "main", "executor_kind": "test.Exec",'
    ' "args": ["--x", "1"], "env": {"K": "v"}, "status": "FAILED", "message": "boom", "exit_code": 3,'
    ' "handle_kind": null, "handle": null, "log_path": null, "created_at": 1001.0, "launched_at": null,'
    ' "started_at": 101.0, "ended_at": 102.0, "duration": 1.0, "executor_id": "1", "executable_id": "1"}],'
    ' "results": {}, "links": {"tb": "http://t/2"},'
    ' "usage": {"cpu_hours": 0.000278, "gpu_hours": 0.0, "tpu_hours": 0.0, "cost": null}}, '
    '{"id": 3, "role": "work_unit", "args": {"lr": 0.30000000000000004, "name": "ü3"}, "identity": "id3",'
    ' "status": "CANCELLED", "exit_codes": [null], "duration": null, "started_at": null, "ended_at": 200.0, "jobs": ['
    '{"id": 3, "experiment_id": 1, "work_unit_id": 3, "name": "main", "executor_kind": "test.Exec",'
    ' "args": ["--x", "1"], "env": {"K": "v"}, "status": "CANCELLED", "message": "cancelled", "exit_code": null,'
    ' "handle_kind": null, "handle": null, "log_path": null, "created_at": 1001.0, "launched_at": null,'
    ' "started_at": null, "ended_at": 200.0, "duration": null, "executor_id": "2", "executable_id": "1"}],'
    ' "results": {}, "links": {}, "usage": {"cpu_hours": 0.0, "gpu_hours": 0.0, "tpu_hours": 0.0, "cost": null}}], '
    '"executors": {"1": {"kind": "test.Exec", "cpus": 2, "extra": {"z": 1, "a": "é"}},'
    ' "2": {"kind": "test.Exec", "cpus": 4}}, '
    '"executables": {"1": {"kind": "test.Binary", "path": "/bin/true"}}}\n'
)


def test_json_of_three_jobs_is_this_exact_document(capsys):
    """The schema, key order and bytes of ``show --json`` (ensure_ascii off, shared executors
    equal in content but not in key order are one entry, the first spelling wins)."""
    experiment_id = _three_job_experiment()
    assert main(["show", str(experiment_id), "--json"]) == 0
    assert capsys.readouterr().out == EXPECTED_THREE_JOBS


def test_table_of_three_jobs_sorted_and_cut(capsys):
    experiment_id = _three_job_experiment()
    assert main(["show", str(experiment_id)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("  created ")]
    assert lines == [
        "Experiment 1: three «jobs»",
        "  status   FAILED (3: 1 completed, 1 failed, 1 cancelled)",
        "  tags     a, b",
        "  notes    n",
        "  usage    0.02 CPU-h",
        "",
        "WU  STATUS     EXIT  DURATION  LOSS  MESSAGE    ARGS",
        '1   COMPLETED  0     1m00s     0.25             lr=0.1 name="ü1"',
        '2   FAILED     3     1.0s      -     boom       lr=0.2 name="ü2"',
        '3   CANCELLED  -     -         -     cancelled  lr=0.30000000000000004 name="ü3"',
        "",
        "WU  TRACKER  LINK",
        "2   tb       http://t/2",
    ]
    assert main(["show", str(experiment_id), "--sort=-lr", "--top", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [u["id"] for u in data["work_units"]] == [3, 2]
    assert data["executors"] == {"1": {"kind": "test.Exec", "cpus": 4}, "2": {"kind": "test.Exec", "cpus": 2,
                                                                              "extra": {"z": 1, "a": "é"}}}
    assert main(["show", f"{experiment_id}/2"]) == 0
    assert "boom" in capsys.readouterr().out


def test_show_of_a_finished_experiment_loads_no_plugin(xcore_home):
    """Nothing to ask a backend and no result to read: the plugin host is never built."""
    import subprocess
    import sys

    experiment_id = _three_job_experiment()
    code = (f"import sys; from xcore.cli.main import main; assert main(['show', '{experiment_id}', '--json']) == 0; "
            f"assert main(['show', '{experiment_id}']) == 0; assert 'pluggy' not in sys.modules, 'plugins loaded'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(EXPECTED_THREE_JOBS)


def test_results_of_a_kind_no_plugin_provides_stay_pending(capsys):
    """Read again once its plugin is installed; meanwhile show skips them without an error."""
    from xcore import paths
    from xcore.runtime import results
    from xcore.store.sqlite import open_url

    experiment_id = _three_job_experiment()
    store = open_url(paths.store_url())
    with store.transaction():
        store._db.execute("UPDATE jobs SET results_at = NULL")  # as if never read
    assert store.results_pending(experiment_id) == [1]  # the one job with a handle, of kind test.Handle
    assert main(["show", str(experiment_id), "--json"]) == 0
    assert capsys.readouterr().out == EXPECTED_THREE_JOBS
    from xcore.hooks.host import get_host

    assert results.collect(store, get_host(), experiment_id) == 0
    assert store.results_pending(experiment_id) == [1]


def test_an_unreadable_job_row_is_shown_unknown_with_the_reason(capsys):
    import sqlite3

    from xcore import paths

    experiment_id = _three_job_experiment()
    db = sqlite3.connect(paths.store_url().removeprefix("sqlite:///"))
    with db:
        db.execute("UPDATE jobs SET args = 'not json' WHERE id = 2")
    db.close()
    assert main(["show", str(experiment_id), "--json"]) == 0
    jobs = [job for unit in json.loads(capsys.readouterr().out)["work_units"] for job in unit["jobs"]]
    assert [j["status"] for j in jobs] == ["COMPLETED", "UNKNOWN", "CANCELLED"]
    assert jobs[1]["message"].startswith("unreadable record: JSONDecodeError")
    assert main(["show", str(experiment_id)]) == 0
    assert "UNKNOWN" in capsys.readouterr().out


def test_show_asks_the_backend_for_unfinished_jobs_only_and_records_what_changed(capsys, monkeypatch):
    from xcore.hooks.host import get_host
    from xcore.runtime import tracking

    plugin_host({"fake": fake})
    with xm.create_experiment("active") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for i in range(3):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True), args={"i": i}))
    jobs = experiment._all_jobs()
    handles = [get_host().serializer.load(j.handle) for j in jobs]
    fake.set_state(handles[0], xm.Status.COMPLETED, "exit code 0", 0)
    asked: list[int] = []
    real = tracking.refresh_jobs

    def counting(store, host, jobs):  # noqa: ANN001, ANN202
        asked.extend(j.id for j in jobs)
        return real(store, host, jobs)

    monkeypatch.setattr(tracking, "refresh_jobs", counting)
    capsys.readouterr()
    assert main(["show", str(experiment.experiment_id), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [j["status"] for u in data["work_units"] for j in u["jobs"]] == ["COMPLETED", "RUNNING", "RUNNING"]
    assert sorted(asked) == sorted(j.id for j in jobs)
    asked.clear()
    fake.set_state(handles[2], xm.Status.FAILED, "boom", 3)
    assert main(["show", f"{experiment.experiment_id}/3"]) == 0  # one unit: only its job is asked
    assert "FAILED" in capsys.readouterr().out and asked == [jobs[2].id]
    asked.clear()
    fake.forget(handles[1])  # the backend no longer knows it: lost, recorded as such
    assert main(["show", str(experiment.experiment_id), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [j["status"] for u in data["work_units"] for j in u["jobs"]][1:] == ["FAILED", "FAILED"]
    assert asked == [jobs[1].id]  # finished jobs are not asked again
    [unit] = experiment._store.work_units(experiment.experiment_id, [2])
    assert unit.jobs[0].message.startswith("lost")


def test_a_job_stored_unknown_is_asked_again(capsys):
    """UNKNOWN (the backend could not be asked last time) is not final: show asks again."""
    from xcore.model.status import JobState

    plugin_host({"fake": fake})
    with xm.create_experiment("unknown") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    [job] = experiment._all_jobs()
    store = experiment._store
    store.record_states([(job.id, JobState(xm.Status.UNKNOWN, "backend unreachable: timed out"))])
    capsys.readouterr()
    assert main(["show", str(experiment.experiment_id), "--json"]) == 0
    [unit] = json.loads(capsys.readouterr().out)["work_units"]
    assert unit["jobs"][0]["status"] == "RUNNING"
    assert store.work_units(experiment.experiment_id)[0].jobs[0].status is xm.Status.RUNNING


def test_pending_results_of_a_kind_no_installed_plugin_declares_load_no_plugin(xcore_home):
    """Their results stay pending (read once the plugin is installed) and the host, pluggy and
    the kinds are never built for them: the metadata says no plugin provides the kind."""
    import subprocess
    import sys

    from xcore import paths
    from xcore.store.sqlite import open_url

    experiment_id = _three_job_experiment()
    store = open_url(paths.store_url())
    with store.transaction():
        store._db.execute("UPDATE jobs SET results_at = NULL")  # as if never read
    assert store.results_pending(experiment_id) == [1]
    code = (f"import sys; from xcore.cli.main import main; assert main(['show', '{experiment_id}', '--json']) == 0; "
            f"assert main(['show', '{experiment_id}']) == 0; assert 'pluggy' not in sys.modules, 'plugins loaded'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert store.results_pending(experiment_id) == [1]


def test_may_provide_a_kind_from_metadata_alone():
    from xcore.hooks.entry_points import KINDS_GROUP, PLUGINS_GROUP, EntryPoint, may_provide

    declaring = [EntryPoint("a", "a.hooks", PLUGINS_GROUP, "xcore-a"),
                 EntryPoint("a.Handle", "a", KINDS_GROUP, "xcore-a")]
    silent = [EntryPoint("b", "b.hooks", PLUGINS_GROUP, "xcore-b")]  # declares nothing: may register any kind
    assert may_provide({"a.Handle"}, {}, declaring)
    assert not may_provide({"z.Handle"}, {}, declaring)
    assert may_provide({"xcore.Binary"}, {}, declaring)  # built in
    assert may_provide({"z.Handle"}, {}, declaring + silent)
    assert not may_provide({"z.Handle"}, {"XCORE_DISABLE_PLUGINS": "b"}, declaring + silent)
    assert not may_provide({"a.Handle"}, {"XCORE_PLUGINS": "c"}, declaring + silent)
    other = [EntryPoint("a.Other", "a", KINDS_GROUP, "xcore-fork")]  # another distribution's plugin "a"
    assert not may_provide({"a.Other"}, {}, declaring + other)
    assert not may_provide(set(), {}, [])


def test_show_builds_its_rows_without_the_cyclic_collector_and_asks_backends_with_it(capsys, monkeypatch):
    """The rows of 10,000 jobs are ~200,000 containers without cycles: the collector walking
    them again and again was a fifth of ``show --json`` (issue 14). Plugin code runs with it."""
    import gc

    from xcore.runtime import tracking
    from xcore.store.sqlite import SqliteStore

    plugin_host({"fake": fake})
    with xm.create_experiment("active") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    seen: dict[str, bool] = {}
    rows, refresh = SqliteStore.unit_rows, tracking.refresh_jobs

    def reading(self, *args):  # noqa: ANN001, ANN002, ANN202
        seen["rows"] = gc.isenabled()
        return rows(self, *args)

    def asking(*args):  # noqa: ANN002, ANN202
        seen["backend"] = gc.isenabled()
        return refresh(*args)

    monkeypatch.setattr(SqliteStore, "unit_rows", reading)
    monkeypatch.setattr(tracking, "refresh_jobs", asking)
    assert gc.isenabled()
    capsys.readouterr()
    assert main(["show", str(experiment.experiment_id), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["work_units"][0]["jobs"][0]["status"] == "RUNNING"
    assert seen == {"rows": False, "backend": True}
    assert gc.isenabled()


def test_render_table_escapes_only_the_cells_that_need_it_and_pads_as_ljust():
    """Rows are checked whole (the common row is all printable); a row with one control
    character still escapes that cell only, and the columns stay aligned on the escaped text."""
    from xcore.cli.tables import render_table

    rows = [(1, "ok", None, "a b"), (22, "bad\x1b[2J", 0.5, "x\ny"), (True, "é", "", "\u202eevil")]
    assert render_table(["WU", "NAME", "V", "ARGS"], rows).splitlines() == [
        "WU    NAME        V    ARGS",
        "1     ok               a b",
        "22    bad\\x1b[2J  0.5  x\\ny",
        "True  é                \\u202eevil",
    ]
    cut = render_table(["A", "LAST"], [("x", "0123456789abcdef")], max_width=15)
    assert cut.splitlines() == ["A  LAST", "x  0123456789a…"]


def test_unit_rows_keep_each_units_jobs_in_id_order_when_units_interleave():
    """Jobs are read in the units index's order (unit, then id): a unit that got a job after
    another unit's still lists its jobs by id, and every unit comes in id order."""
    from xcore import paths
    from xcore.store.records import NewJob
    from xcore.store.sqlite import open_url

    store = open_url(paths.store_url())
    experiment = store.create_experiment("interleaved")

    def job(name: str) -> NewJob:
        return NewJob(name, "test.Exec", {"kind": "test.Exec"}, {"kind": "test.Binary"}, [], {})

    a = store.add_work_unit(experiment.id, 2, "work_unit", {}, "", [job("a")])
    b = store.add_work_unit(experiment.id, 1, "work_unit", {}, "", [job("b")])
    c = store.add_jobs(experiment.id, 2, [job("c")])
    d = store.add_jobs(experiment.id, 1, [job("d")])
    rows = store.unit_rows(experiment.id)
    assert [(u["id"], [j["id"] for j in u["jobs"]]) for u in rows] == [(1, b + d), (2, a + c)]
    assert [j["name"] for u in store.unit_rows(experiment.id, [2]) for j in u["jobs"]] == ["a", "c"]
    store.close()
