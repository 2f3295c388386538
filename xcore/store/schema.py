"""The tables of the metadata store, written once for every SQL dialect (see ``xcore.store.migrations``
for what each version added).

Migrations 1 to 4 are the same statements in SQLite and PostgreSQL but for column types and a
few dialect-only lines, filled in from ``SQLITE`` or ``POSTGRES``; version 5 rebuilt ``jobs``,
which each database does its own way. A store created today runs every migration in order, so
a new store and a migrated one have the same tables.
"""

from __future__ import annotations

from xcore.store.migrations import SCHEMA_VERSION

_V1_TO_V4 = [
    # 1: initial schema
    """
    CREATE TABLE experiments (
        id {experiment_key}, title TEXT NOT NULL, tags TEXT NOT NULL DEFAULT '[]',
        notes TEXT NOT NULL DEFAULT '', script_path TEXT, script_sha256 TEXT, git_commit TEXT, git_dirty {bool},
        {user} TEXT NOT NULL DEFAULT '', host TEXT NOT NULL DEFAULT '', created_at {real} NOT NULL,
        launch_status TEXT NOT NULL DEFAULT 'LAUNCHING', launch_error TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE work_units (
        experiment_id {id} NOT NULL REFERENCES experiments(id), id INTEGER NOT NULL, role TEXT NOT NULL,
        args TEXT NOT NULL, identity TEXT NOT NULL DEFAULT '', status TEXT NOT NULL DEFAULT 'LAUNCHING',
        created_at {real} NOT NULL, PRIMARY KEY (experiment_id, id)
    );
    CREATE TABLE jobs (
        id {key}, experiment_id {id} NOT NULL, work_unit_id INTEGER NOT NULL, name TEXT NOT NULL,
        executor_kind TEXT NOT NULL, executor TEXT NOT NULL, executable TEXT NOT NULL, args TEXT NOT NULL,
        env TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'LAUNCHING', message TEXT NOT NULL DEFAULT '',
        exit_code INTEGER, handle_kind TEXT, handle TEXT, log_path TEXT, created_at {real} NOT NULL,
        launched_at {real}, started_at {real}, ended_at {real},
        FOREIGN KEY (experiment_id, work_unit_id) REFERENCES work_units(experiment_id, id)
    );
    CREATE INDEX jobs_by_unit ON jobs(experiment_id, work_unit_id);
    CREATE INDEX jobs_active ON jobs(experiment_id, status);
    CREATE TABLE job_events (
        {event_seq}job_id {id} NOT NULL REFERENCES jobs(id), status TEXT NOT NULL,
        message TEXT NOT NULL DEFAULT '', exit_code INTEGER, at {real} NOT NULL
    );
    CREATE INDEX job_events_by_job ON job_events({event_index});
    {version_table}
    """,
    # 2: the store's id, where copied experiments come from, experiments by user
    """
    CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO store_meta (key, value) VALUES ('store_id', {random_id});
    ALTER TABLE experiments ADD COLUMN origin TEXT{unique_origin};
    CREATE INDEX experiments_by_user ON experiments({user}, id);
    """,
    # 3: launcher leases and submission intents, so a killed launcher's work is resolved later
    """
    ALTER TABLE jobs ADD COLUMN lease_id {id};
    CREATE INDEX jobs_by_lease ON jobs(lease_id, status);
    CREATE TABLE launch_leases (
        id {key}, experiment_id {id} NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, proc_start {real},
        heartbeat {real} NOT NULL, state TEXT NOT NULL DEFAULT 'open'
    );
    CREATE TABLE launch_intents (
        id {key}, lease_id {id} NOT NULL, executor_kind TEXT NOT NULL, job_ids TEXT NOT NULL,
        created_at {real} NOT NULL
    );
    {intents_index}
    """,
    # 4: trial results reported by the programs (xcore.runtime.results) and tracker links per job
    """
    ALTER TABLE jobs ADD COLUMN results_at {real};
    CREATE TABLE job_results (
        job_id {id} NOT NULL REFERENCES jobs(id), experiment_id {id} NOT NULL, work_unit_id INTEGER NOT NULL,
        name TEXT NOT NULL, value {real}, at {real} NOT NULL, PRIMARY KEY (job_id, name)
    );
    CREATE INDEX job_results_by_unit ON job_results(experiment_id, work_unit_id);
    CREATE TABLE job_links (
        job_id {id} NOT NULL REFERENCES jobs(id), experiment_id {id} NOT NULL, work_unit_id INTEGER NOT NULL,
        name TEXT NOT NULL, url TEXT NOT NULL, PRIMARY KEY (job_id, name)
    );
    CREATE INDEX job_links_by_unit ON job_links(experiment_id, work_unit_id);
    """,
]

# 5: shared job specs (xcore.store.specs): each distinct executor and executable once, the
# jobs naming them by id. SQLite before 3.35 cannot drop a column, so ``jobs`` is rebuilt
# (with foreign keys off, see the SQLite dialect's migrate) keeping every id and its
# AUTOINCREMENT counter; ``jobs_by_lease`` indexes the lease alone (its one query finds a
# lease's rows through it).
_SQLITE_V5 = """
    CREATE TABLE job_specs (id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, body TEXT NOT NULL);
    INSERT OR IGNORE INTO job_specs (digest, body)
        SELECT xcore_digest(body), body FROM (
            SELECT id, 0 AS side, executor AS body FROM jobs UNION ALL SELECT id, 1, executable FROM jobs
            ORDER BY id, side);
    CREATE TABLE jobs_v5 (
        id INTEGER PRIMARY KEY AUTOINCREMENT, experiment_id INTEGER NOT NULL, work_unit_id INTEGER NOT NULL,
        name TEXT NOT NULL, executor_kind TEXT NOT NULL, executor_spec INTEGER NOT NULL REFERENCES job_specs(id),
        executable_spec INTEGER NOT NULL REFERENCES job_specs(id), args TEXT NOT NULL, env TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'LAUNCHING', message TEXT NOT NULL DEFAULT '', exit_code INTEGER,
        handle_kind TEXT, handle TEXT, log_path TEXT, created_at REAL NOT NULL, launched_at REAL,
        started_at REAL, ended_at REAL, lease_id INTEGER, results_at REAL,
        FOREIGN KEY (experiment_id, work_unit_id) REFERENCES work_units(experiment_id, id)
    );
    INSERT INTO jobs_v5 (id, experiment_id, work_unit_id, name, executor_kind, executor_spec, executable_spec,
            args, env, status, message, exit_code, handle_kind, handle, log_path, created_at, launched_at,
            started_at, ended_at, lease_id, results_at)
        SELECT j.id, j.experiment_id, j.work_unit_id, j.name, j.executor_kind, xs.id, ys.id, j.args, j.env,
            j.status, j.message, j.exit_code, j.handle_kind, j.handle, j.log_path, j.created_at, j.launched_at,
            j.started_at, j.ended_at, j.lease_id, j.results_at
        FROM jobs j JOIN job_specs xs ON xs.digest = xcore_digest(j.executor)
            JOIN job_specs ys ON ys.digest = xcore_digest(j.executable)
        ORDER BY j.id;
    DELETE FROM sqlite_sequence WHERE name = 'jobs_v5';
    UPDATE sqlite_sequence SET name = 'jobs_v5' WHERE name = 'jobs';
    DROP TABLE jobs;
    ALTER TABLE jobs_v5 RENAME TO jobs;
    CREATE INDEX jobs_by_unit ON jobs(experiment_id, work_unit_id);
    CREATE INDEX jobs_active ON jobs(experiment_id, status);
    CREATE INDEX jobs_by_lease ON jobs(lease_id);
    """

# PostgreSQL drops the two columns in place (the new columns come last, as ALTER TABLE adds them).
_POSTGRES_V5 = """
    CREATE TABLE job_specs (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, digest TEXT NOT NULL UNIQUE, body TEXT NOT NULL
    );
    INSERT INTO job_specs (digest, body)
        SELECT encode(sha256(convert_to(body, 'UTF8')), 'hex'), body
        FROM (SELECT executor AS body FROM jobs UNION SELECT executable FROM jobs) AS b;
    ALTER TABLE jobs ADD COLUMN executor_spec BIGINT REFERENCES job_specs(id),
        ADD COLUMN executable_spec BIGINT REFERENCES job_specs(id);
    UPDATE jobs SET executor_spec = xs.id, executable_spec = ys.id FROM job_specs xs, job_specs ys
        WHERE xs.body = jobs.executor AND ys.body = jobs.executable;
    ALTER TABLE jobs ALTER COLUMN executor_spec SET NOT NULL, ALTER COLUMN executable_spec SET NOT NULL,
        DROP COLUMN executor, DROP COLUMN executable;
    DROP INDEX jobs_by_lease;
    CREATE INDEX jobs_by_lease ON jobs(lease_id);
    """

# 6: dependencies between work units (xcore.model.dependencies) and the units held until
# theirs ended (``held_units.state``: held, then released or cancelled by one observer).
_V6 = """
    CREATE TABLE unit_dependencies (
        experiment_id {id} NOT NULL, work_unit_id INTEGER NOT NULL, on_experiment_id {id} NOT NULL,
        on_work_unit_id INTEGER NOT NULL, on_job TEXT NOT NULL DEFAULT '', condition TEXT NOT NULL DEFAULT 'success',
        PRIMARY KEY (experiment_id, work_unit_id, on_experiment_id, on_work_unit_id, on_job)
    );
    CREATE INDEX unit_dependencies_by_dependency ON unit_dependencies(on_experiment_id, on_work_unit_id);
    CREATE TABLE held_units (
        experiment_id {id} NOT NULL, work_unit_id INTEGER NOT NULL, state TEXT NOT NULL DEFAULT 'held',
        changed_at {real} NOT NULL, PRIMARY KEY (experiment_id, work_unit_id)
    );
    """

# 7: learning curves (xcore.runtime.series): each job's downsampled series, one row per name,
# its points a JSON list of [step, value] pairs.
_V7 = """
    CREATE TABLE job_series (
        job_id {id} NOT NULL REFERENCES jobs(id), experiment_id {id} NOT NULL, work_unit_id INTEGER NOT NULL,
        name TEXT NOT NULL, points TEXT NOT NULL, at {real} NOT NULL, PRIMARY KEY (job_id, name)
    );
    CREATE INDEX job_series_by_unit ON job_series(experiment_id, work_unit_id);
    """

# 8: the notifications outbox (xcore.runtime.notifications): one row per (event, sink). The
# primary key is the claim: of two observers that saw the same event, one inserts it; a row is
# then taken for delivery by one conditional UPDATE (``claimed_by``, ``lease_until``).
_V8 = """
    CREATE TABLE notifications (
        event_id TEXT NOT NULL, sink TEXT NOT NULL, experiment_id {id} NOT NULL, event_type TEXT NOT NULL,
        body TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT NOT NULL DEFAULT '', created_at {real} NOT NULL, next_at {real} NOT NULL,
        lease_until {real}, claimed_by TEXT, sent_at {real}, PRIMARY KEY (event_id, sink)
    );
    CREATE INDEX notifications_due ON notifications(state, next_at);
    CREATE INDEX notifications_by_experiment ON notifications(experiment_id);
    """

# 9: attempts (issue 23): a job's row holds its current attempt (``attempt``, the ``failure``
# class of its last failure); every earlier attempt is a row of ``job_attempts``, written once
# and never overwritten, with the handle and log of that attempt.
_V9 = """
    ALTER TABLE jobs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE jobs ADD COLUMN failure TEXT;
    CREATE TABLE job_attempts (
        job_id {id} NOT NULL REFERENCES jobs(id), number INTEGER NOT NULL, status TEXT NOT NULL, failure TEXT,
        exit_code INTEGER, started_at {real}, ended_at {real}, message TEXT NOT NULL DEFAULT '',
        handle_kind TEXT, handle TEXT, log_path TEXT, PRIMARY KEY (job_id, number)
    );
    """

SQLITE = {
    "experiment_key": "INTEGER PRIMARY KEY AUTOINCREMENT", "key": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "id": "INTEGER", "real": "REAL", "bool": "INTEGER", "user": "user", "event_seq": "",
    "event_index": "job_id", "version_table": "", "random_id": "lower(hex(randomblob(16)))",
    "unique_origin": ";\n    CREATE UNIQUE INDEX experiments_by_origin ON experiments(origin)", "intents_index": "",
}
POSTGRES = {
    # experiment ids are allocated by the store (MAX + 1 under a lock: no gaps), so no identity
    "experiment_key": "BIGINT PRIMARY KEY", "key": "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    "id": "BIGINT", "real": "DOUBLE PRECISION", "bool": "BOOLEAN", "user": '"user"',
    "event_seq": "seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n        ", "event_index": "job_id, seq",
    "version_table": "CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (0);",
    "random_id": "replace(gen_random_uuid()::text, '-', '')", "unique_origin": " UNIQUE",
    "intents_index": "CREATE INDEX launch_intents_by_lease ON launch_intents(lease_id);",
}


def migrations(types: dict[str, str]) -> list[str]:
    """Every migration's statements in one dialect (``SQLITE`` or ``POSTGRES``), version 1 first."""
    fifth = _SQLITE_V5 if types is SQLITE else _POSTGRES_V5
    found = [migration.format(**types) for migration in _V1_TO_V4] + [fifth]
    found += [migration.format(**types) for migration in (_V6, _V7, _V8, _V9)]
    assert len(found) == SCHEMA_VERSION
    return found
