import multiprocessing
import sqlite3

import pytest

from xcore.errors import ConfigurationError, NotFoundError
from xcore.model.status import JobState, Status
from xcore.store.migrations import SCHEMA_VERSION
from xcore.store.records import NewJob
from xcore.store.sqlite import SqliteStore


def _job(name="main"):
    return NewJob(name, "xlocal.Local", {"kind": "xlocal.Local"}, {"kind": "x"}, ["--a=1"], {"K": "v"})


def test_experiment_ids_start_at_one_and_fields_round_trip(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite")
    record = store.create_experiment("t", tags=["a"], notes="n", script_path="/s.py", script_sha256="ab",
                                     git_commit="c0ffee", git_dirty=True, user="u", host="h")
    assert record.id == 1
    again = store.get_experiment(1)
    assert (again.title, again.tags, again.git_dirty, again.user) == ("t", ["a"], True, "u")
    with pytest.raises(NotFoundError, match="xcore list"):
        store.get_experiment(99)


def test_status_history_and_unit_status(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite")
    exp = store.create_experiment("t")
    [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {"lr": 1}, "", [_job("a"), _job("b")])
    store.record_states([(a, JobState(Status.RUNNING)), (b, JobState(Status.RUNNING))])
    store.record_states([(a, JobState(Status.COMPLETED, "exit code 0", 0)),
                         (b, JobState(Status.FAILED, "exit code 3", 3))])
    store.record_states([(a, JobState(Status.RUNNING))])  # a finished job never becomes active again
    [unit] = store.work_units(exp.id)
    assert unit.status is Status.FAILED and unit.exit_codes == [0, 3]
    assert [e.status for e in store.job_history(a)] == [Status.LAUNCHING, Status.RUNNING, Status.COMPLETED]
    assert store.get_experiment(exp.id).status_counts == {"FAILED": 1}


def test_no_start_for_a_job_cancelled_before_it_ran_and_no_negative_duration(tmp_path):
    """Seen after it ended (end in the past, no start from the backend): a cancelled job keeps
    no start; any other job gets a start no later than its end."""
    store = SqliteStore(tmp_path / "db.sqlite")
    exp = store.create_experiment("t")
    [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [_job("a"), _job("b")])
    store.record_states([(a, JobState(Status.PENDING)), (b, JobState(Status.PENDING))])
    store.record_states([(a, JobState(Status.CANCELLED, "cancelled", ended_at=1000.0)),
                         (b, JobState(Status.COMPLETED, "exit code 0", 0, ended_at=1000.0))])
    jobs = {j.id: j for j in store.work_units(exp.id)[0].jobs}
    assert (jobs[a].started_at, jobs[a].ended_at, jobs[a].duration) == (None, 1000.0, None)
    assert jobs[b].started_at == 1000.0 and jobs[b].duration == 0


def test_list_filters(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite")
    for title, tags in [("alpha sweep", ["x"]), ("beta", ["y"]), ("ALPHA two", ["x", "y"])]:
        store.create_experiment(title, tags=tags)
    assert [r.title for r in store.list_experiments(title="alpha")] == ["ALPHA two", "alpha sweep"]
    assert [r.id for r in store.list_experiments(tag="y")] == [3, 2]
    assert len(store.list_experiments(limit=1)) == 1


def test_newer_schema_is_refused_without_touching_data(tmp_path):
    path = tmp_path / "db.sqlite"
    SqliteStore(path).create_experiment("keep me")
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ConfigurationError, match="Upgrade xcore"):
        SqliteStore(path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT title FROM experiments").fetchone()[0] == "keep me"


def _add_many(path: str, experiment_id: int, first: int, count: int) -> None:
    store = SqliteStore(path)
    for unit in range(first, first + count):
        store.add_work_unit(experiment_id, unit, "work_unit", {"u": unit}, "", [_job()])
    store.close()


def test_concurrent_launchers_lose_nothing(tmp_path):
    """8 processes add 500 work units each to one store."""
    path = str(tmp_path / "db.sqlite")
    store = SqliteStore(path)
    experiments = [store.create_experiment(f"e{i}").id for i in range(8)]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_add_many, args=(path, experiments[i % 8], 1 + (i // 8) * 500, 500)) for i in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    total = sum(len(store.work_units(e)) for e in experiments)
    assert total == 4000
    assert all(len(u.jobs) == 1 for e in experiments for u in store.work_units(e))


def test_unit_status_sql_is_combine_for_every_mix_of_job_statuses():
    """The SQL the stores aggregate a unit's jobs with (statements.unit_status) gives what
    xcore.model.status.combine gives, for every set of job statuses (and none) and each repetition."""
    import itertools
    import sqlite3

    from xcore.model.status import Status, combine
    from xcore.store import statements

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE j (unit INTEGER, status TEXT)")
    mixes = [combo for size in range(len(Status) + 1) for combo in itertools.combinations(list(Status), size)]
    for unit, combo in enumerate(mixes):
        db.executemany("INSERT INTO j VALUES (?, ?)", [(unit, s.value) for s in combo for _ in range(1 + unit % 2)])
    query = f"SELECT {statements.unit_status('status')} FROM j WHERE unit = ?"
    for unit, combo in enumerate(mixes):
        assert db.execute(query, (unit,)).fetchone()[0] == combine(combo).value, combo


_BIG_LAUNCH = r"""
import sys, threading
from xcore.model.status import JobState, Status
from xcore.store.records import NewJob, UnitWrite
from xcore.store.sqlite import SqliteStore

store = SqliteStore(sys.argv[1])
exp = store.create_experiment("big").id
job = NewJob("main", "xlocal.Local", {"kind": "xlocal.Local"}, {"kind": "x"}, [], {})
ids = [j for [j] in store.record_adds([UnitWrite(exp, u, "work_unit", {}, "", [job]) for u in range(1, 1204)])]
store.mark_launched([(j, "k", {"task": i, "run_dir": "/r"}, f"/l/{i}") for i, j in enumerate(ids)])
assert [t.name for t in threading.enumerate() if t.name == "xcore-checkpoint"], "checkpoint not in a thread"
store.record_states([(ids[0], JobState(Status.RUNNING))])  # a small write meanwhile
print("marked", flush=True)
# no close(): the interpreter waits for the checkpoint before it exits
"""


def test_a_big_mark_launched_checkpoints_in_a_thread_that_ends_before_the_process(tmp_path):
    """mark_launched of a sweep (issue 14: 10,000 jobs, 6.5 MB of WAL) commits without
    waiting for SQLite's checkpoint and its fsyncs; a non-daemon thread checkpoints while the
    launcher goes on, and the process does not exit before it is done: the database file
    alone (without its WAL) holds every launched job."""
    import shutil
    import subprocess
    import sys

    db = tmp_path / "s.db"
    done = subprocess.run([sys.executable, "-c", _BIG_LAUNCH, str(db)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "marked" in done.stdout, done.stderr
    alone = tmp_path / "alone" / "s.db"
    alone.parent.mkdir()
    shutil.copy(db, alone)  # the main file only: what a checkpoint copied into it
    with sqlite3.connect(alone) as conn:
        counts = dict(conn.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall())
        handles = conn.execute("SELECT COUNT(*) FROM jobs WHERE handle IS NOT NULL").fetchone()[0]
    assert (counts, handles) == ({"PENDING": 1202, "RUNNING": 1}, 1203)


def test_automatic_checkpoints_are_back_once_the_background_checkpoint_is_done(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    exp = store.create_experiment("big").id
    ids = [store.add_work_unit(exp, u, "work_unit", {}, "", [_job()])[0] for u in range(1, 1002)]
    store.mark_launched([(j, "k", {"i": i}, None) for i, j in enumerate(ids)])
    checkpointer = store.dialect.checkpointer
    assert checkpointer is not None
    checkpointer.join()
    assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    store.mark_launched([(ids[0], "k", {"i": 0}, None)])  # small: checkpointed by SQLite as usual, no thread
    assert not checkpointer.is_alive() and store.dialect.checkpointer is checkpointer
    store.close()
    assert {u.status for u in SqliteStore(tmp_path / "s.db").work_units(exp)} == {Status.PENDING}
