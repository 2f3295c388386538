"""Schema versions: an older store is migrated with its data intact, a newer one is refused."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
from pathlib import Path

import attrs
import pytest
from store_contract_helpers import new_job, open_url

from core_helpers import REPO, run_xcore
from xcore.errors import StoreError
from xcore.model.status import JobState, Status
from xcore.store.migrations import SCHEMA_VERSION, SchemaVersionError
from xcore.store.sqlite import SqliteStore

OLD_COMMIT = "00c5f85"
V1_DDL = Path(__file__).parent / "data" / "sqlite_schema_v1.sql"


def _old_sqlite_module(tmp_path: Path):
    """xcore/sqlite_store.py as it was at 00c5f85 (schema version 1), or None without git history."""
    try:
        source = subprocess.run(["git", "show", f"{OLD_COMMIT}:xcore/sqlite_store.py"], cwd=REPO, check=True,
                                capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for old, new in [("from xcore.records import", "from xcore.store.records import"),  # moved since
                     ("from xcore.status import", "from xcore.model.status import"),
                     ("from xcore import datamodel", "from xcore.model import datamodel")]:
        source = source.replace(old, new)
    path = tmp_path / "old_sqlite_store.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_sqlite_store", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.SqliteStore.__abstractmethods__ = frozenset()  # the interface has grown since
    return module


def _make_v1_store(tmp_path: Path, path: Path) -> dict:
    """A schema-1 store holding one experiment with two work units, written by the old code."""
    old = _old_sqlite_module(tmp_path)
    if old is not None:
        assert old.SCHEMA_VERSION == 1
        store = old.SqliteStore(path)
        exp = store.create_experiment("old sweep ü", tags=["t"], user="ann", host="h", git_dirty=False)
        [a] = store.add_work_unit(exp.id, 1, "work_unit", {"lr": 0.1}, "", [new_job("a", {"TOKEN": "<redacted>"})])
        [b, c] = store.add_work_unit(exp.id, 2, "work_unit", {"lr": 0.2}, "id2", [new_job("b"), new_job("c")])
        store.mark_launched([(a, "xlocal.Process", {"pid": 7}, "/log/a"), (b, "k", {}, None), (c, "k", {}, None)])
        store.record_states([(a, JobState(Status.COMPLETED, "exit code 0", 0)), (b, JobState(Status.RUNNING))])
        snapshot = {"experiment": store.get_experiment(exp.id), "units": store.work_units(exp.id),
                    "history": {j: store.job_history(j) for j in (a, b, c)}}
        store.close()
    else:  # a checkout without history: the same schema from the fixture file
        db = sqlite3.connect(path)
        db.executescript(V1_DDL.read_text())
        db.execute("PRAGMA user_version = 1")
        db.execute("INSERT INTO experiments (title, tags, user, host, git_dirty, created_at) "
                   "VALUES ('old sweep ü', '[\"t\"]', 'ann', 'h', 0, 1.5)")
        db.execute("INSERT INTO work_units (experiment_id, id, role, args, created_at)"
                   " VALUES (1, 1, 'work_unit', ?, 2)",
                   (json.dumps({"lr": 0.1}),))
        db.execute("INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor, executable, args,"
                   " env, created_at) VALUES (1, 1, 'a', 'k', '{}', '{}', '[]', '{}', 2)")
        db.execute("INSERT INTO job_events (job_id, status, at) VALUES (1, 'LAUNCHING', 2)")
        db.commit()
        db.close()
        snapshot = None
    return {"snapshot": snapshot}


def test_sqlite_store_from_00c5f85_is_migrated_on_open_with_data_intact(tmp_path):
    path = tmp_path / "old.db"
    before = _make_v1_store(tmp_path, path)["snapshot"]
    store = SqliteStore(path)
    assert store.migrated_from == 1
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    if before is not None:
        exp = before["experiment"]
        assert attrs.asdict(store.get_experiment(exp.id)) == attrs.asdict(exp)
        assert [attrs.asdict(u) for u in store.work_units(exp.id)] == [attrs.asdict(u) for u in before["units"]]
        for job_id, history in before["history"].items():
            assert store.job_history(job_id) == history
    else:
        assert store.get_experiment(1).title == "old sweep ü"
    # the migrated store is a normal current store: new ids continue, new features work
    assert store.create_experiment("new", user="bob").id == 2
    assert [r.id for r in store.list_experiments(user="ann")] == [1]
    info = store.info()
    assert (info.schema_version, info.experiments) == (SCHEMA_VERSION, 2)
    store.close()
    assert SqliteStore(path).migrated_from is None  # once only


def test_v1_fixture_matches_the_old_code(tmp_path):
    """The fixture DDL (used without git history) is what 00c5f85 created."""
    old = _old_sqlite_module(tmp_path)
    if old is None:
        pytest.skip("no git history in this checkout")
    assert old.MIGRATIONS[0].strip() in V1_DDL.read_text()


def test_failed_sqlite_migration_changes_nothing(tmp_path):
    path = tmp_path / "old.db"
    _make_v1_store(tmp_path, path)
    db = sqlite3.connect(path)
    db.execute("CREATE INDEX experiments_by_user ON experiments(title)")  # the migration's last step will fail
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="experiments_by_user") as raised:
        SqliteStore(path)
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "origin" not in [r[1] for r in db.execute("PRAGMA table_info(experiments)")]
    assert db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'store_meta'").fetchone()[0] == 0
    assert db.execute("SELECT title FROM experiments").fetchone()[0] == "old sweep ü"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_newer_schema_is_refused_without_touching_data(kind, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}" if kind == "sqlite" else request.getfixturevalue("pg_url")
    store = open_url(url)
    store.create_experiment("keep me")
    store.close()
    if kind == "sqlite":
        with sqlite3.connect(tmp_path / "db.sqlite") as db:
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    for options in ({}, {"migrate": True}):
        with pytest.raises(SchemaVersionError, match="Upgrade xcore"):
            open_url(url, **options)
    result = run_xcore("store", "migrate", url)
    assert result.returncode == 1 and "newer than this xcore" in result.stderr
    if kind == "postgresql":
        import psycopg

        assert "<redacted>" in result.stderr and _password(url) not in result.stderr + result.stdout
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT title FROM experiments").fetchone()[0] == "keep me"


def _password(url: str) -> str:
    import psycopg

    return psycopg.conninfo.conninfo_to_dict(url)["password"]


@pytest.mark.parametrize("old", [1, 2, 4])
def test_postgres_store_of_an_old_schema_is_migrated_by_the_command(pg_url, old):
    """A team store is not migrated behind the team's back: the error names the command.
    (2 is what the first PostgreSQL store release created: no leases yet; 4 the last whose jobs
    held their executor and executable.)"""
    import psycopg

    from xcore.store import postgres as postgres_store

    with psycopg.connect(pg_url, autocommit=True) as conn:
        for migration in postgres_store.MIGRATIONS[:old]:
            conn.execute(migration)
        conn.execute("UPDATE schema_version SET version = %s", (old,))
        conn.execute("INSERT INTO experiments (id, title, \"user\", created_at) VALUES (1, 'old', 'ann', 1.5)")
        conn.execute("INSERT INTO work_units (experiment_id, id, role, args, created_at)"
                     " VALUES (1, 1, 'work_unit', '{\"lr\": 0.1}', 2)")
        conn.execute("INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor, executable,"
                     " args, env, created_at) VALUES (1, 1, 'a', 'k', '{}', '{}', '[]', '{}', 2)")
        conn.execute("INSERT INTO job_events (job_id, status, at) VALUES (1, 'LAUNCHING', 2)")
    with pytest.raises(SchemaVersionError, match="xcore store migrate"):
        open_url(pg_url)
    listed = run_xcore("list", env={"XCORE_STORE": pg_url})
    assert listed.returncode == 1 and "xcore store migrate" in listed.stderr
    result = run_xcore("store", "migrate", env={"XCORE_STORE": pg_url})
    assert result.returncode == 0, result.stderr
    assert f"migrated from schema version {old} to {SCHEMA_VERSION}" in result.stdout
    assert _password(pg_url) not in result.stdout + result.stderr
    store = open_url(pg_url)
    assert store.get_experiment(1).title == "old"
    [unit] = store.work_units(1)
    assert unit.args == {"lr": 0.1} and [j.name for j in unit.jobs] == ["a"]
    assert [e.status for e in store.job_history(1)] == [Status.LAUNCHING]
    assert [r.id for r in store.list_experiments(user="ann")] == [1]
    assert store.create_experiment("new").id == 2
    lease = store.open_lease(2, "h", 1, None)  # leases work; the old job belongs to none
    [job] = store.add_work_unit(2, 1, "work_unit", {}, "", [new_job()], lease_id=lease)
    assert [j.id for j in store.lease_orphans(lease)[1]] == [job]
    again = run_xcore("store", "migrate", env={"XCORE_STORE": pg_url})
    assert "is current; nothing to do" in again.stdout


def test_store_migrate_command_on_an_old_sqlite_file(tmp_path):
    path = tmp_path / "old.db"
    _make_v1_store(tmp_path, path)
    result = run_xcore("store", "migrate", f"sqlite:///{path}")
    assert result.returncode == 0, result.stderr
    assert f"migrated from schema version 1 to {SCHEMA_VERSION} (1 experiments" in result.stdout
    assert f"schema version  {SCHEMA_VERSION} (this xcore: {SCHEMA_VERSION})" in run_xcore(
        "store", "info", f"sqlite:///{path}").stdout
