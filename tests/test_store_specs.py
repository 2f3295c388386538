"""Schema 5: shared job specs. A version-4 store (the v4 DDL, rows of several experiments whose
jobs have different executors) is migrated with every job reading back as before, on both
stores; new jobs name existing spec rows; the lease query still uses ``jobs_by_lease``; and
``xcore show --json`` prints the same bytes before and after the migration."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest
from store_contract_helpers import open_url

from core_helpers import REPO
from xcore.errors import StoreError
from xcore.model.status import Status
from xcore.store import postgres as postgres_store  # noqa: F401 - imported lazily by the store factory otherwise
from xcore.store import specs
from xcore.store import sqlite as sqlite_store
from xcore.store.migrations import SCHEMA_VERSION
from xcore.store.records import JobRecord, NewJob

V4_COMMIT = "f5d1eb1"  # the last commit of schema version 4

SLURM = {"kind": "xhpc.Slurm", "partition": "gpu", "time": "1:00:00", "requirements": {"cpu": 2}}
SLURM_REORDERED = {"time": "1:00:00", "kind": "xhpc.Slurm", "partition": "gpu", "requirements": {"cpu": 2}}
BIG = {"kind": "xlocal.Local", "note": "ü" * 3000 + " \"quoted\" $HOME\n"}  # over a B-tree entry's limit
TRAIN = {"name": "train", "path": "/opt/train.py", "args": [], "env_vars": {}}
EVAL = {"name": "eval ü", "path": "/opt/eval.py", "args": ["--full"], "env_vars": {"A": "1"}}

EXPERIMENTS = [  # id, title, tags, user
    (1, "sweep ü", ["t"], "ann"), (2, "other", [], "bob"), (3, "empty", [], "ann"),
]
UNITS = [  # experiment, unit, args, status
    (1, 1, {"lr": 0.1}, "COMPLETED"), (1, 2, {"lr": 0.2}, "FAILED"), (1, 3, {"lr": 0.3}, "LAUNCHING"),
    (2, 1, {}, "CANCELLED"),
]
JOBS = [
    JobRecord(1, 1, 1, "main", "xhpc.Slurm", SLURM, TRAIN, ["--lr=0.1"], {"K": "v"}, Status.COMPLETED, "exit code 0",
              0, "xhpc.SlurmHandle", {"job_id": "10_1"}, "/logs/1", 100.0, 101.0, 102.0, 110.0),
    JobRecord(2, 1, 2, "main", "xhpc.Slurm", SLURM, TRAIN, ["--lr=0.2"], {}, Status.FAILED, "exit code 3", 3,
              "xhpc.SlurmHandle", {"job_id": "10_2"}, "/logs/2", 100.0, 101.0, 102.5, 111.0),
    JobRecord(3, 1, 3, "main", "xhpc.Slurm", SLURM_REORDERED, EVAL, ["--lr=0.3"], {}, created_at=100.5),
    JobRecord(4, 2, 1, "a", "xlocal.Local", BIG, TRAIN, [], {"T": "<redacted>"}, Status.CANCELLED, "cancelled", None,
              "xlocal.Process", {"pid": 7}, None, 200.0, 200.5, None, 201.0),
    JobRecord(5, 2, 1, "b", "xhpc.Slurm", SLURM, EVAL, ["x y", "$Z"], {}, Status.COMPLETED, "exit code 0", 0,
              "xhpc.SlurmHandle", {"job_id": "11"}, "/logs/5", 200.0, 200.5, 200.6, 202.0),
]
LEASED = {3: 1}  # job id -> the launcher lease it was added under
RESULTS = [(1, "loss", 0.5, 110.0), (1, "acc", None, 110.0)]
LINKS = [(1, "wandb", "https://wandb.invalid/r/1")]


def _write_v4(db: Any, mark: str, *, deleted_job: bool) -> None:
    """The rows above in a version-4 schema, as xcore 4 stored them (JSON text per job)."""
    def run(sql: str, *params: Any) -> None:
        db.execute(sql.replace("?", mark), params)

    for eid, title, tags, user in EXPERIMENTS:
        run('INSERT INTO experiments (id, title, tags, "user", host, created_at, launch_status)'
            " VALUES (?, ?, ?, ?, 'h', ?, 'LAUNCHED')", eid, title, json.dumps(tags), user, 90.0 + eid)
    for eid, uid, args, status in UNITS:
        run("INSERT INTO work_units (experiment_id, id, role, args, identity, status, created_at)"
            " VALUES (?, ?, 'work_unit', ?, '', ?, ?)", eid, uid, json.dumps(args), status, 99.0 + uid)
    run("INSERT INTO launch_leases (id, experiment_id, host, pid, proc_start, heartbeat)"
        " VALUES (1, 1, 'h', 123, NULL, 1)")
    results_at = {j.id: j.ended_at + 0.5 for j in JOBS if j.status.is_terminal}
    for j in JOBS:
        run("INSERT INTO jobs (id, experiment_id, work_unit_id, name, executor_kind, executor, executable, args, env,"
            " status, message, exit_code, handle_kind, handle, log_path, created_at, launched_at, started_at, ended_at,"
            " lease_id, results_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            j.id, j.experiment_id, j.work_unit_id, j.name, j.executor_kind, json.dumps(j.executor),
            json.dumps(j.executable), json.dumps(j.args), json.dumps(j.env), j.status.value, j.message, j.exit_code,
            j.handle_kind, None if j.handle is None else json.dumps(j.handle), j.log_path, j.created_at,
            j.launched_at, j.started_at, j.ended_at, LEASED.get(j.id), results_at.get(j.id))
        run("INSERT INTO job_events (job_id, status, at) VALUES (?, 'LAUNCHING', ?)", j.id, j.created_at)
        if j.status is not Status.LAUNCHING:
            run("INSERT INTO job_events (job_id, status, message, exit_code, at) VALUES (?, ?, ?, ?, ?)",
                j.id, j.status.value, j.message, j.exit_code, j.ended_at)
    for job_id, name, value, at in RESULTS:
        run("INSERT INTO job_results (job_id, experiment_id, work_unit_id, name, value, at) VALUES (?, 1, 1, ?, ?, ?)",
            job_id, name, value, at)
    for job_id, name, url in LINKS:
        run("INSERT INTO job_links (job_id, experiment_id, work_unit_id, name, url) VALUES (?, 1, 1, ?, ?)",
            job_id, name, url)
    if deleted_job:  # an identity relaunch dropped the newest job: its id is never handed out again
        run("INSERT INTO jobs (id, experiment_id, work_unit_id, name, executor_kind, executor, executable, args, env,"
            " created_at) VALUES (9, 2, 1, 'gone', 'k', '{}', '{}', '[]', '{}', 1)")
        run("DELETE FROM jobs WHERE id = 9")


def _v4_sqlite(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("BEGIN")
    for migration in sqlite_store.MIGRATIONS[:4]:
        for statement in migration.split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute("PRAGMA user_version = 4")
    _write_v4(db, "?", deleted_job=True)
    db.execute("COMMIT")
    db.close()


def _v4_postgres(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for migration in postgres_store.MIGRATIONS[:4]:
            conn.execute(migration)
        conn.execute("UPDATE schema_version SET version = 4")
        _write_v4(conn, "%s", deleted_job=False)
        conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), 9)")


def _jobs(store: Any, experiment_ids: list[int]) -> list[dict[str, Any]]:
    return [attrs.asdict(j) for e in experiment_ids for u in store.work_units(e) for j in u.jobs]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_v4_store_is_migrated_to_shared_specs_with_every_job_intact(kind, tmp_path, request):
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'v4.db'}"
        _v4_sqlite(tmp_path / "v4.db")
    else:
        url = request.getfixturevalue("pg_url")
        _v4_postgres(url)
    store = open_url(url, migrate=True)
    assert store.migrated_from == 4 and store.info().schema_version == SCHEMA_VERSION >= 5
    expected = [attrs.asdict(j) for j in JOBS]
    assert _jobs(store, [1, 2, 3]) == expected
    # the key order of each stored text is kept: SLURM and SLURM_REORDERED are two specs
    assert [list(j.executor) for u in store.work_units(1) for j in u.jobs][2] == list(SLURM_REORDERED)
    rows = [job for e in (1, 2) for unit in store.unit_rows(e) for job in unit["jobs"]]
    assert [{**job, "status": Status(job["status"])} for job in rows] == expected
    assert [[e.status for e in store.job_history(j.id)] for j in JOBS] == [
        [Status.LAUNCHING] + ([] if j.status is Status.LAUNCHING else [j.status]) for j in JOBS]
    assert store.results(1) == {1: {"loss": 0.5, "acc": None}} and store.links(1) == {1: {"wandb": LINKS[0][2]}}
    in_flight, unlaunched = store.lease_orphans(1)
    assert in_flight == [] and [attrs.asdict(j) for j in unlaunched] == [attrs.asdict(JOBS[2])]
    assert _spec_bodies(url) == sorted(json.dumps(s) for s in (SLURM, SLURM_REORDERED, BIG, TRAIN, EVAL))
    # a new job of a known executor names its row; ids go on after the deleted job's on SQLite
    [new] = store.add_work_unit(3, 1, "work_unit", {}, "", [NewJob("n", "xhpc.Slurm", SLURM, EVAL, [], {})])
    assert new == 10 and _spec_bodies(url) == sorted(json.dumps(s) for s in (SLURM, SLURM_REORDERED, BIG, TRAIN, EVAL))
    assert _jobs(store, [3])[0]["executor"] == SLURM
    assert _job_columns(url) >= {"executor_spec", "executable_spec"} and not _job_columns(url) & {"executor",
                                                                                                   "executable"}
    store.close()
    assert open_url(url).migrated_from is None


def _spec_bodies(url: str) -> list[str]:
    return sorted(r[0] for r in _query(url, "SELECT body FROM job_specs"))


def _job_columns(url: str) -> set[str]:
    if url.startswith("sqlite"):
        return {r[1] for r in _query(url, "PRAGMA table_info(jobs)")}
    return {r[0] for r in _query(url, "SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs'"
                                      " AND table_schema = current_schema()")}


def _query(url: str, sql: str) -> list[tuple]:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()  # type: ignore[arg-type]


def test_sqlite_migration_keeps_the_job_id_counter_and_indexes(tmp_path):
    path = tmp_path / "v4.db"
    _v4_sqlite(path)
    sqlite_store.SqliteStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'").fetchall() == [(9,)]
    assert db.execute("SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'jobs_v5'").fetchone()[0] == 0
    indexes = {r[0]: [c[2] for c in db.execute(f"PRAGMA index_info({r[0]})")]
               for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'"
                                   " AND name NOT LIKE 'sqlite_%'")}
    assert indexes == {"jobs_by_unit": ["experiment_id", "work_unit_id"], "jobs_active": ["experiment_id", "status"],
                       "jobs_by_lease": ["lease_id"]}
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # the children still name jobs (not a renamed table)
    assert "REFERENCES jobs(id)" in db.execute("SELECT sql FROM sqlite_master WHERE name = 'job_events'").fetchone()[0]


def test_failed_v4_migration_changes_nothing(tmp_path):
    path = tmp_path / "v4.db"
    _v4_sqlite(path)
    with sqlite3.connect(path) as db:  # the migration's first statement will fail
        db.execute("CREATE TABLE job_specs (x)")
    with pytest.raises(StoreError, match="job_specs already exists"):
        sqlite_store.SqliteStore(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 4
    assert "executor" in {r[1] for r in db.execute("PRAGMA table_info(jobs)")}
    assert db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == len(JOBS)
    assert db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'jobs_v5'").fetchone()[0] == 0
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 0  # (a new connection's default)


def test_v4_store_with_a_dangling_event_still_migrates(tmp_path):
    """A row naming a job that is gone (only a hand-edited store has one) keeps the store usable."""
    path = tmp_path / "v4.db"
    _v4_sqlite(path)
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO job_events (job_id, status, at) VALUES (77, 'LAUNCHING', 1)")
    store = sqlite_store.SqliteStore(path)
    assert _jobs(store, [1, 2]) == [attrs.asdict(j) for j in JOBS]
    assert store._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # on again after the migration


def test_specs_are_stored_once_per_distinct_text_by_every_writer(store_url, tmp_path):
    """record_adds, add_work_unit, add_jobs and import_history all name shared spec rows."""
    from xcore.store.copy import copy_store
    from xcore.store.records import UnitWrite

    store = open_url(store_url)
    exp = store.create_experiment("s").id
    job = NewJob("m", "xhpc.Slurm", SLURM, TRAIN, [], {})
    store.record_adds([UnitWrite(exp, u, "work_unit", {"u": u}, "", [job, attrs.evolve(job, name="n")])
                       for u in range(1, 4)])
    store.add_work_unit(exp, 4, "work_unit", {}, "", [NewJob("m", "k", dict(SLURM), dict(TRAIN), [], {})])
    store.add_jobs(exp, 4, [NewJob("e", "k", SLURM, EVAL, [], {})])
    assert sorted(_spec_bodies(store_url)) == sorted(json.dumps(s) for s in (SLURM, TRAIN, EVAL))
    other = open_url(f"sqlite:///{tmp_path / 'copy.db'}")
    copy_store(store, other)
    copy_store(store, other)  # idempotent
    assert _jobs(other, [1]) == _jobs(store, [exp]) and len(_jobs(other, [1])) == 8
    assert sorted(_spec_bodies(f"sqlite:///{tmp_path / 'copy.db'}")) == sorted(
        json.dumps(s) for s in (SLURM, TRAIN, EVAL))
    assert store.info().jobs == other.info().jobs == 8


def test_lease_query_finds_its_rows_through_jobs_by_lease(tmp_path):
    store = sqlite_store.SqliteStore(tmp_path / "s.db")
    exp = store.create_experiment("x").id
    lease = store.open_lease(exp, "h", 1, None)
    store.record_adds([_write(exp, u) for u in range(1, 50)], lease_id=lease)
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    store.lease_orphans(lease)
    store._db.set_trace_callback(None)
    [query] = [s for s in seen if "lease_id" in s and "FROM jobs" in s]
    plan = " ".join(r[3] for r in store._db.execute(f"EXPLAIN QUERY PLAN {query}"))
    assert "jobs_by_lease" in plan, plan


def test_postgres_lease_query_can_use_jobs_by_lease(pg_url):
    import psycopg

    open_url(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        conn.execute("SET enable_seqscan = off")
        sql = (specs.select_jobs(["id", "executor"]) + " WHERE jobs.lease_id = 1 AND jobs.status = 'LAUNCHING'"
               " AND jobs.handle IS NULL ORDER BY jobs.id")
        plan = " ".join(r[0] for r in conn.execute(f"EXPLAIN {sql}").fetchall())
    assert "jobs_by_lease" in plan, plan


def _write(exp: int, unit: int) -> Any:
    from xcore.store.records import UnitWrite

    return UnitWrite(exp, unit, "work_unit", {"u": unit}, "", [NewJob("m", "k", SLURM, TRAIN, [], {})])


def _v4_module(tmp_path: Path) -> Any:
    """xcore/store/sqlite.py of the last schema-4 commit, or None without git history."""
    try:
        source = subprocess.run(["git", "show", f"{V4_COMMIT}:xcore/store/sqlite.py"], cwd=REPO, check=True,
                                capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for old, new in [("SCHEMA_VERSION = store_migrations.SCHEMA_VERSION", "SCHEMA_VERSION = 4"),
                     ("from xcore.status import", "from xcore.model.status import"),  # moved since
                     ("from xcore import datamodel", "from xcore.model import datamodel")]:
        source = source.replace(old, new)
    path = tmp_path / "v4_sqlite_store.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("v4_sqlite_store", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_show_json_is_byte_identical_after_the_migration(tmp_path, monkeypatch, capsys):
    """What xcore 4 printed for a store, xcore 5 prints for the same store migrated."""
    import argparse

    from xcore.cli import show as show_module
    from xcore.workspace import Workspace

    old = _v4_module(tmp_path)
    if old is None:
        pytest.skip(f"the schema-4 store code is read from git commit {V4_COMMIT}, not in this checkout "
                    "(a shallow clone); test_v4_store_is_migrated_... still checks the migrated jobs")
    path = tmp_path / "v4.db"
    _v4_sqlite(path)
    before = old.SqliteStore(shutil.copy(path, tmp_path / "v4-copy.db"), migrate=False)
    assert _jobs(before, [1, 2]) == [attrs.asdict(j) for j in JOBS]  # the fixture is what xcore 4 reads

    def shown(store: Any) -> list[str]:
        monkeypatch.setattr(show_module, "current", lambda: Workspace(store=store))
        out = []
        for experiment in ("1", "2", "1/3"):
            assert show_module.show(argparse.Namespace(experiment=experiment, json=True)) == 0
            out.append(capsys.readouterr().out)
        return out

    printed = shown(before)
    assert all('"work_units": [{' in text for text in printed)
    after = sqlite_store.SqliteStore(path)
    assert after.migrated_from == 4
    assert shown(after) == printed
    assert json.loads(printed[1])["executors"] == {"1": BIG, "2": SLURM}


@pytest.mark.parametrize("other_commits", [True, False])
def test_postgres_launchers_recording_one_new_spec_at_once_share_its_row(pg_url, other_commits):
    """Another launcher's transaction holds the same new spec, uncommitted: this one's insert
    waits for it, then uses its row (committed) or writes its own (rolled back). Never an error."""
    import threading

    import psycopg

    from xcore.store.records import UnitWrite

    store = open_url(pg_url)
    exp = store.create_experiment("two launchers").id
    body = json.dumps(EVAL)
    other = psycopg.connect(pg_url)
    other.execute(specs.insert_sql("%s"), (specs.digest(body), body))  # its transaction stays open
    ids: list[list[int]] = []
    writer = threading.Thread(target=lambda: ids.extend(store.record_adds(
        [UnitWrite(exp, 1, "work_unit", {}, "", [NewJob("m", "k", SLURM, EVAL, [], {})])])))
    writer.start()
    writer.join(0.5)
    assert writer.is_alive()  # waiting on the other transaction's row
    if other_commits:
        other.commit()
    else:
        other.rollback()
    other.close()
    writer.join(30)
    assert not writer.is_alive() and len(ids) == 1
    assert _spec_bodies(pg_url).count(body) == 1
    assert _jobs(store, [exp])[0]["executable"] == EVAL


def test_spec_ids_are_remembered_only_once_committed(store_url):
    """A launcher looks its sweep's specs up once, not per group commit; a spec first seen in a
    transaction that rolled back is looked up (and written) again."""
    from xcore.store.records import UnitWrite

    store = open_url(store_url)
    exp = store.create_experiment("cache").id
    store.record_adds([_write(exp, 1)])
    with pytest.raises(ValueError):  # a job of no unit: the transaction, with EVAL's new row, rolls back
        store.record_adds([UnitWrite(exp, 99, None, None, "", [NewJob("m", "k", SLURM, EVAL, [], {})])])
    assert json.dumps(EVAL) not in _spec_bodies(store_url)
    store.record_adds([UnitWrite(exp, 2, "work_unit", {}, "", [NewJob("m", "k", SLURM, EVAL, [], {})])])
    assert [j["executable"] for j in _jobs(store, [exp])] == [TRAIN, EVAL]
    if store_url.startswith("sqlite"):
        seen: list[str] = []
        store._db.set_trace_callback(seen.append)  # type: ignore[attr-defined]
        store.record_adds([_write(exp, 3)])
        assert not [s for s in seen if "job_specs" in s]
