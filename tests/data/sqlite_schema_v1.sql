-- The SQLite store schema version 1, as xcore/sqlite_store.py created it at commit 00c5f85
-- (PRAGMA user_version = 1). tests/test_store_migrations.py builds an old store from it.
    CREATE TABLE experiments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        title TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        notes TEXT NOT NULL DEFAULT '',
        script_path TEXT,
        script_sha256 TEXT,
        git_commit TEXT,
        git_dirty INTEGER,
        user TEXT NOT NULL DEFAULT '',
        host TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        launch_status TEXT NOT NULL DEFAULT 'LAUNCHING',
        launch_error TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE work_units (
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        id INTEGER NOT NULL,
        role TEXT NOT NULL,
        args TEXT NOT NULL,
        identity TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'LAUNCHING',
        created_at REAL NOT NULL,
        PRIMARY KEY (experiment_id, id)
    );
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        experiment_id INTEGER NOT NULL,
        work_unit_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        executor_kind TEXT NOT NULL,
        executor TEXT NOT NULL,
        executable TEXT NOT NULL,
        args TEXT NOT NULL,
        env TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'LAUNCHING',
        message TEXT NOT NULL DEFAULT '',
        exit_code INTEGER,
        handle_kind TEXT,
        handle TEXT,
        log_path TEXT,
        created_at REAL NOT NULL,
        launched_at REAL,
        started_at REAL,
        ended_at REAL,
        FOREIGN KEY (experiment_id, work_unit_id) REFERENCES work_units(experiment_id, id)
    );
    CREATE INDEX jobs_by_unit ON jobs(experiment_id, work_unit_id);
    CREATE INDEX jobs_active ON jobs(experiment_id, status);
    CREATE TABLE job_events (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        status TEXT NOT NULL,
        message TEXT NOT NULL DEFAULT '',
        exit_code INTEGER,
        at REAL NOT NULL
    );
    CREATE INDEX job_events_by_job ON job_events(job_id);
    
