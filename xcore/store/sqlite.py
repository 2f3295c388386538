"""The embedded metadata store: one SQLite file, safe for many processes at once.

WAL journaling lets readers run while a launcher writes; every write is one
``BEGIN IMMEDIATE`` transaction so concurrent launchers queue instead of failing.
The schema is versioned with ``PRAGMA user_version`` and migrated forward on open.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from xcore import paths
from xcore.errors import NotFoundError, StoreError
from xcore.model.status import JobState, Status
from xcore.settings import env_number
from xcore.store import ExperimentHistory, Imported, MetadataStore, StoreInfo, records, rows, specs, statements
from xcore.store import migrations as store_migrations
from xcore.store.records import (
    ExperimentRecord,
    JobRecord,
    LeaseRecord,
    NewJob,
    StatusEvent,
    UnitSummary,
    UnitWrite,
    WorkUnitRecord,
)

MIGRATIONS: list[str] = [
    # 1: initial schema
    """
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
    """,
    # 2: the store's id, where copied experiments come from, experiments by user
    """
    CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO store_meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))));
    ALTER TABLE experiments ADD COLUMN origin TEXT;
    CREATE UNIQUE INDEX experiments_by_origin ON experiments(origin);
    CREATE INDEX experiments_by_user ON experiments(user, id);
    """,
    # 3: launcher leases and submission intents, so a killed launcher's work is resolved later
    """
    ALTER TABLE jobs ADD COLUMN lease_id INTEGER;
    CREATE INDEX jobs_by_lease ON jobs(lease_id, status);
    CREATE TABLE launch_leases (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        experiment_id INTEGER NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        proc_start REAL,
        heartbeat REAL NOT NULL,
        state TEXT NOT NULL DEFAULT 'open'
    );
    CREATE TABLE launch_intents (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        lease_id INTEGER NOT NULL,
        executor_kind TEXT NOT NULL,
        job_ids TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    """,
    # 4: trial results reported by the programs (xcore.runtime.results) and tracker links per job
    """
    ALTER TABLE jobs ADD COLUMN results_at REAL;
    CREATE TABLE job_results (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        experiment_id INTEGER NOT NULL,
        work_unit_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        value REAL,
        at REAL NOT NULL,
        PRIMARY KEY (job_id, name)
    );
    CREATE INDEX job_results_by_unit ON job_results(experiment_id, work_unit_id);
    CREATE TABLE job_links (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        experiment_id INTEGER NOT NULL,
        work_unit_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        url TEXT NOT NULL,
        PRIMARY KEY (job_id, name)
    );
    CREATE INDEX job_links_by_unit ON job_links(experiment_id, work_unit_id);
    """,
    # 5: shared job specs (xcore.store.specs): each distinct executor and executable once, the
    # jobs naming them by id. SQLite before 3.35 cannot drop a column, so ``jobs`` is rebuilt
    # (with foreign keys off, see _migrate) keeping every id and its AUTOINCREMENT counter;
    # ``jobs_by_lease`` indexes the lease alone (its one query finds a lease's rows through it).
    """
    CREATE TABLE job_specs (
        id INTEGER PRIMARY KEY,
        digest TEXT NOT NULL UNIQUE,
        body TEXT NOT NULL
    );
    INSERT OR IGNORE INTO job_specs (digest, body)
        SELECT xcore_digest(body), body FROM (
            SELECT id, 0 AS side, executor AS body FROM jobs UNION ALL SELECT id, 1, executable FROM jobs
            ORDER BY id, side);
    CREATE TABLE jobs_v5 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        experiment_id INTEGER NOT NULL,
        work_unit_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        executor_kind TEXT NOT NULL,
        executor_spec INTEGER NOT NULL REFERENCES job_specs(id),
        executable_spec INTEGER NOT NULL REFERENCES job_specs(id),
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
        lease_id INTEGER,
        results_at REAL,
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
    """,
]
SCHEMA_VERSION = store_migrations.SCHEMA_VERSION  # one number for both stores
assert len(MIGRATIONS) == SCHEMA_VERSION

_JOB_COLUMNS = rows.JOB_COLUMNS
_COPIED_COLUMNS = rows.COPIED_JOB_COLUMNS
_STORED_COLUMNS = rows.STORED_JOB_COLUMNS  # specs by id in the table
_SQL = statements.Statements("?")
_ADDED_EVENTS = ("INSERT INTO job_events (job_id, status, at) SELECT id, 'LAUNCHING', ? FROM jobs"
                 " WHERE id BETWEEN ? AND ? ORDER BY id")
# mark_launched, per chunk of at most 500 launched ids (``{}``: their placeholders)
_LAUNCHED_EVENTS = ("INSERT INTO job_events (job_id, status, message, at) SELECT id, 'PENDING', 'submitted', ?"
                    " FROM jobs WHERE id IN ({}) AND status = 'LAUNCHING' ORDER BY id")
_LAUNCHED_UNITS = (
    f"UPDATE work_units SET status = (SELECT {statements.unit_status('j.status')} FROM jobs j"
    " WHERE j.experiment_id = work_units.experiment_id AND j.work_unit_id = work_units.id)"
    " WHERE (experiment_id, id) IN (SELECT experiment_id, work_unit_id FROM jobs WHERE id IN ({}))")


_AUTOCHECKPOINT_PAGES = 1000  # SQLite's default
_BACKGROUND_CHECKPOINT_JOBS = 1000  # mark_launched of this many jobs checkpoints in a thread (about 650 KB of WAL)


class SqliteStore(MetadataStore):
    writes_in_background = False  # its writes are CPU work in this process (MetadataStore.writes_in_background)

    def __init__(self, path: str | Path, *, migrate: bool = True) -> None:
        self.path = Path(path)
        self.migrated_from: int | None = None  # the schema version found, when this open migrated it
        self._lock = threading.RLock()
        self._in_transaction = False  # inside transaction(): writes join it instead of committing
        self._known_specs = specs.KnownSpecs()  # spec ids committed through this connection
        self._checkpointer: threading.Thread | None = None  # see _checkpoint_in_background
        self._prepare_file()
        busy = env_number("XCORE_STORE_BUSY_TIMEOUT", 120)  # seconds a writer waits for the lock
        with self._errors("open"):
            self._db = sqlite3.connect(self.path, timeout=busy, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute(f"PRAGMA busy_timeout = {int(busy * 1000)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate(migrate)

    # -- plumbing ------------------------------------------------------------------------

    def _prepare_file(self) -> None:
        """Make sure the file is a store before SQLite opens it: create a new one whole and
        private (so no process ever sees a half-made or zero-byte store), and refuse a
        zero-byte file instead of silently treating it as an empty store."""
        parent = self.path.parent
        if parent == paths.home():
            paths.ensure_home()
        elif parent.exists() and not parent.is_dir():
            raise StoreError(f"The metadata store's directory {parent} is a file: move it away or set XCORE_STORE.")
        elif not parent.exists():
            paths.private_dir(parent)
        try:
            info = self.path.stat()
        except FileNotFoundError:
            self._create()
            return
        except OSError as exc:
            raise StoreError(f"Cannot read the metadata store {self.path}: {exc.strerror or exc}.") from exc
        if not self.path.is_file():
            raise StoreError(f"The metadata store {self.path} is not a file: move it away or set XCORE_STORE.")
        if info.st_size == 0:
            raise StoreError(
                f"The metadata store {self.path} is empty (0 bytes), not an xcore store: it was truncated or "
                f"made by something else. Restore it from a backup, or move it away (mv {self.path} "
                f"{self.path}.bad) to start a new store."
            )
        for suffix in ("", "-wal", "-shm"):
            paths.private_file(Path(f"{self.path}{suffix}"))

    def _create(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{os.urandom(4).hex()}.new")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, paths.PRIVATE_FILE))
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                _add_functions(db)
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("BEGIN IMMEDIATE")
                for migration in MIGRATIONS:
                    for statement in migration.split(";"):
                        if statement.strip():
                            db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                db.execute("COMMIT")
            finally:
                db.close()
            try:
                os.link(tmp, self.path)  # never replaces a store another process created meanwhile
            except FileExistsError:
                pass
        except sqlite3.Error as exc:
            raise StoreError(self._explain(exc, "create")) from exc
        except OSError as exc:
            raise StoreError(
                f"Cannot create the metadata store {self.path}: {exc.strerror or exc}. "
                f"Check that {self.path.parent} is writable and has free space, or set XCORE_HOME elsewhere."
            ) from exc
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)

    def _explain(self, exc: sqlite3.Error, action: str) -> str:
        """One line that says what is wrong with the store and what to do."""
        text = str(exc)
        lowered = text.lower()
        where = self.path
        if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
            return (f"The metadata store {where} is corrupt or not an xcore store ({text}). Restore it from a "
                    f"backup, or move it away (mv {where} {where}.bad) to start a new store.")
        if "readonly" in lowered or "read-only" in lowered or not self._writable():
            return (f"The metadata store {where} is read-only ({text}): make the file and its directory "
                    f"writable, or set XCORE_HOME to a writable directory.")
        if "full" in lowered or (("i/o" in lowered or "unable to open" in lowered) and self._disk_full()):
            return (f"The disk holding the metadata store {where} is full ({text}): free some space "
                    f"(df -h {where.parent}) and retry.")
        if "locked" in lowered or "busy" in lowered:
            return (f"The metadata store {where} stayed locked by another process ({text}): "
                    f"retry when the other xcore command has finished.")
        if "unable to open" in lowered or "disk i/o" in lowered:
            return (f"Cannot {action} the metadata store {where} ({text}): check that it and {where.parent} "
                    f"exist and are readable and writable, or set XCORE_HOME elsewhere.")
        return f"The metadata store {where} failed to {action}: {text}."

    def _disk_full(self) -> bool:
        try:
            info = os.statvfs(self.path.parent)
        except OSError:
            return False
        return info.f_bavail * info.f_frsize < 1 << 20  # under 1 MiB: SQLite cannot even map its -shm file

    def _writable(self) -> bool:
        """Can this process write the store and create its -wal/-shm files next to it?"""
        targets = [self.path.parent] + ([self.path] if self.path.exists() else [])
        return all(os.access(target, os.W_OK) for target in targets)

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.IntegrityError as exc:  # e.g. a work unit id recorded twice: the caller's mistake
            raise ValueError(f"The metadata store {self.path} refused the record: {exc}.") from exc
        except sqlite3.Error as exc:
            raise StoreError(self._explain(exc, action)) from exc

    @contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock, self._errors("read"):
            yield

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors("write"):
            if self._in_transaction:  # inside transaction(): its end commits
                yield self._db
                return
            self._db.execute("BEGIN IMMEDIATE")
            committed = False
            try:
                yield self._db
                self._db.execute("COMMIT")
                committed = True
            except BaseException:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite rolled back already (e.g. disk full)
                raise
            finally:
                if committed:
                    self._known_specs.committed()
                else:
                    self._known_specs.discarded()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The writes inside are one transaction, committed when the block ends: a work unit
        and its tracker links cost one commit, not two, and are recorded together or not at all."""
        with self._write():
            self._in_transaction = True  # read only by the thread holding self._lock
            try:
                yield
            finally:
                self._in_transaction = False

    def _migrate(self, migrate: bool) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if not store_migrations.check_version(version, str(self.path), will_migrate=migrate or version == 0,
                                              current=SCHEMA_VERSION):
            return
        _add_functions(self._db)
        # Off while migrating (it cannot change inside a transaction): rebuilding ``jobs`` drops
        # the table the status history, results and links name. The rebuild keeps every job
        # and its id, so they name the same rows after it; the count is checked before the commit.
        self._db.execute("PRAGMA foreign_keys = OFF")
        try:
            with self._write() as db:
                version = db.execute("PRAGMA user_version").fetchone()[0]  # another process may have won
                if 0 < version < SCHEMA_VERSION:
                    self.migrated_from = version
                jobs = db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] if version else 0
                for number in range(version, SCHEMA_VERSION):
                    for statement in MIGRATIONS[number].split(";"):
                        if statement.strip():
                            db.execute(statement)
                if db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] != jobs:
                    raise StoreError(f"Migrating the metadata store {self.path} to schema version {SCHEMA_VERSION} "
                                     f"would lose jobs; nothing was changed. Please report this.")
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        finally:
            self._db.execute("PRAGMA foreign_keys = ON")

    def close(self) -> None:
        self._join_checkpointer()
        with self._lock:
            self._db.close()

    @contextmanager
    def _checkpoint_in_background(self, big: bool) -> Iterator[None]:
        """For a big write (``mark_launched`` of a sweep: 10,000 jobs write 6.5 MB to the WAL):
        its commit skips SQLite's automatic checkpoint, which would copy the WAL into the
        database file and wait for two fsyncs (60-90 ms at 10,000 jobs) before the launcher
        could go on; a thread then runs the same checkpoint on a connection of its own while
        the launcher settles its futures, closes its lease and reports. The commit itself is
        the same (in the WAL, as durable as any commit with ``synchronous = NORMAL``). The
        automatic checkpoints stay off until that thread is done (a small commit meanwhile
        would otherwise do the whole checkpoint itself). The thread is not a daemon: the
        interpreter waits for it before exiting (and ``close`` joins it), so the next command
        finds the WAL checkpointed, as before."""
        if not big or self._in_transaction:  # inside transaction(): its commit checkpoints as usual
            yield
            return
        self._join_checkpointer()
        with self._lock:
            self._db.execute("PRAGMA wal_autocheckpoint = 0")
        started = False
        try:
            yield
            self._checkpointer = threading.Thread(target=self._checkpoint, name="xcore-checkpoint")
            self._checkpointer.start()
            started = True
        finally:
            if not started:
                self._automatic_checkpoints()

    def _join_checkpointer(self) -> None:
        if self._checkpointer is not None and self._checkpointer is not threading.current_thread():
            self._checkpointer.join()

    def _checkpoint(self) -> None:
        """A passive checkpoint (it never blocks writers; if it fails, the next automatic one
        does it), then the automatic ones again."""
        try:
            with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as db:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:
            pass
        finally:
            self._automatic_checkpoints()

    def _automatic_checkpoints(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):  # closed meanwhile: nothing to restore
            self._db.execute(f"PRAGMA wal_autocheckpoint = {_AUTOCHECKPOINT_PAGES}")

    # -- experiments ---------------------------------------------------------------------

    def create_experiment(
        self,
        title: str,
        *,
        tags: Sequence[str] = (),
        notes: str = "",
        script_path: str | None = None,
        script_sha256: str | None = None,
        git_commit: str | None = None,
        git_dirty: bool | None = None,
        user: str = "",
        host: str = "",
    ) -> ExperimentRecord:
        now = time.time()
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO experiments (title, tags, notes, script_path, script_sha256, git_commit,"
                " git_dirty, user, host, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (title, json.dumps(list(tags)), notes, script_path, script_sha256, git_commit,
                 None if git_dirty is None else int(git_dirty), user, host, now),
            )
            experiment_id = int(cursor.lastrowid or 0)
        return self.get_experiment(experiment_id)

    def update_experiment(self, experiment_id: int, **changes: Any) -> None:
        changes = rows.experiment_changes(changes)
        if not changes:
            return
        assignments = ", ".join(f"{name} = ?" for name in changes)
        with self._write() as db:
            cursor = db.execute(f"UPDATE experiments SET {assignments} WHERE id = ?",
                                (*changes.values(), experiment_id))
            if cursor.rowcount == 0:
                raise NotFoundError(f"No experiment {experiment_id} in {self.path}.")

    def get_experiment(self, experiment_id: int) -> ExperimentRecord:
        with self._reading():
            row = self._db.execute("SELECT * FROM experiments WHERE id = ?", (experiment_id,)).fetchone()
            if row is None:
                raise NotFoundError(
                    f"No experiment {experiment_id} in the store {self.path}. `xcore list` shows what exists.")
            return self._experiment(row, self._status_counts([experiment_id]).get(experiment_id, {}))

    def list_experiments(
        self, *, status: str | None = None, title: str | None = None, tag: str | None = None, limit: int | None = 20,
        user: str | None = None,
    ) -> list[ExperimentRecord]:
        query = "SELECT * FROM experiments"
        where, params = [], []
        if user is not None:
            where.append("user = ?")
            params.append(user)
        if title:
            where.append("instr(lower(title), lower(?)) > 0")
            params.append(title)
        if tag:
            where.append("EXISTS (SELECT 1 FROM json_each(experiments.tags) WHERE value = ?)")
            params.append(tag)
        if where:
            query += " WHERE " + " AND ".join(where)
        query += " ORDER BY id DESC"
        if not status and limit is not None:
            query += f" LIMIT {int(limit)}"
        with self._reading():
            found = self._db.execute(query, params).fetchall()
            records: list[ExperimentRecord] = []
            # Status is derived, so filter after computing it, in pages to keep memory flat
            # (without a status filter the first page is the answer: count no more than that).
            size = 500 if status or limit is None else max(limit, 1)
            for start in range(0, len(found), size):
                page = found[start : start + size]
                counts = self._status_counts([r["id"] for r in page])
                for row in page:
                    record = self._experiment(row, counts.get(row["id"], {}))
                    if status and record.status.value != status.upper():
                        continue
                    records.append(record)
                    if limit is not None and len(records) >= limit:
                        return records
            return records

    def _status_counts(self, experiment_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        marks = ",".join("?" * len(experiment_ids))
        counts: dict[int, dict[str, int]] = {}
        for row in self._db.execute(
            f"SELECT experiment_id, status, COUNT(*) FROM work_units WHERE role = 'work_unit'"
            f" AND experiment_id IN ({marks}) GROUP BY experiment_id, status",
            list(experiment_ids),
        ):
            counts.setdefault(row[0], {})[row[1]] = row[2]
        return counts

    @staticmethod
    def _experiment(row: sqlite3.Row, counts: dict[str, int]) -> ExperimentRecord:
        try:
            return rows.experiment_record(row, counts)
        except Exception as exc:  # noqa: BLE001 - one bad row must not hide the others
            title = row["title"] if isinstance(row["title"], str) else ""
            return ExperimentRecord(id=row["id"], title=title, created_at=_number(row["created_at"]),
                                    status_counts=counts, unreadable=records.unreadable(exc))

    # -- work units and jobs -------------------------------------------------------------

    def add_work_unit(
        self, experiment_id: int, work_unit_id: int, role: str, args: Any, identity: str, jobs: Sequence[NewJob],
        *, lease_id: int | None = None,
    ) -> list[int]:
        now = time.time()
        with self._write() as db:
            db.execute(_SQL.insert_unit, (experiment_id, work_unit_id, role, json.dumps(args), identity, now))
            return self._insert_jobs(db, experiment_id, work_unit_id, jobs, now, lease_id)

    def add_jobs(self, experiment_id: int, work_unit_id: int, jobs: Sequence[NewJob], *,
                 lease_id: int | None = None, replace_unlaunched: bool = False) -> list[int]:
        with self._write() as db:
            if replace_unlaunched:
                self._drop_unlaunched(db, experiment_id, work_unit_id)
            ids = self._insert_jobs(db, experiment_id, work_unit_id, jobs, time.time(), lease_id)
            db.execute(_SQL.unit_launching, (experiment_id, work_unit_id))
            return ids

    def record_adds(self, writes: Sequence[UnitWrite], *, lease_id: int | None = None) -> list[list[int]]:
        """Many adds in one ``BEGIN IMMEDIATE`` transaction, a few statements each. Job ids
        are taken from the table's AUTOINCREMENT counter while the write lock is held, so
        concurrent launchers never share one; each distinct executor and executable is
        encoded to JSON and looked up in ``job_specs`` once per group."""
        now = time.time()
        with self._write() as db:
            for write in writes:
                if write.replace_unlaunched:
                    self._drop_unlaunched(db, write.experiment_id, write.work_unit_id)
            seq = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'").fetchone()
            top = db.execute("SELECT MAX(id) FROM jobs").fetchone()[0]
            first = max(seq[0] if seq else 0, top or 0) + 1
            new = rows.add_rows(writes, range(first, first + sum(len(w.jobs) for w in writes)),
                                self._spec_ids(db).of, now, lease_id)
            _insert_rows(db, _SQL.insert_unit, new.units)
            _insert_rows(db, _SQL.insert_jobs, new.jobs)
            # The group's ids are first.. (drawn above under the write lock): their first events
            # are one statement, not one per job (each statement lets go of the GIL and waits up to
            # the switch interval to get it back while the script adds on the main thread).
            db.execute(_ADDED_EVENTS, (now, first, first + len(new.jobs) - 1))
            db.executemany(_SQL.unit_launching, new.more)
            if new.links:
                db.executemany(_SQL.upsert_link, new.links)
            return new.ids

    @staticmethod
    def _drop_unlaunched(db: sqlite3.Connection, experiment_id: int, work_unit_id: int) -> None:
        """An identity relaunch: forget the unit's jobs that ended without reaching a backend."""
        old = [r[0] for r in db.execute(
            "SELECT id FROM jobs WHERE experiment_id = ? AND work_unit_id = ? AND handle IS NULL"
            " AND status IN ('FAILED', 'CANCELLED')", (experiment_id, work_unit_id))]
        for start in range(0, len(old), 500):
            chunk = old[start : start + 500]
            marks = ",".join("?" * len(chunk))
            db.execute(f"DELETE FROM job_events WHERE job_id IN ({marks})", chunk)
            db.execute(f"DELETE FROM jobs WHERE id IN ({marks})", chunk)

    def _insert_jobs(
        self, db: sqlite3.Connection, experiment_id: int, work_unit_id: int, jobs: Sequence[NewJob], now: float,
        lease_id: int | None = None,
    ) -> list[int]:
        ids = []
        spec = self._spec_ids(db).of
        for job in jobs:
            cursor = db.execute(
                "INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor_spec, executable_spec,"
                " args, env, created_at, lease_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (experiment_id, work_unit_id, job.name, job.executor_kind, spec(job.executor),
                 spec(job.executable), json.dumps(job.args), json.dumps(job.env), now, lease_id),
            )
            job_id = int(cursor.lastrowid or 0)
            db.execute(_SQL.launching_event, (job_id, now))
            ids.append(job_id)
        return ids

    def _spec_ids(self, db: sqlite3.Connection) -> specs.SpecIds:
        """Spec ids for the current write transaction (see xcore.store.specs)."""
        insert, select = specs.insert_sql("?"), specs.select_sql("?")

        def store_one(digest: str, body: str) -> int:
            db.execute(insert, (digest, body))
            return int(db.execute(select, (digest,)).fetchone()[0])

        return self._known_specs.begin(store_one)

    def mark_launched(self, launched: Sequence[tuple[int, str, dict[str, Any], str | None]], *,
                      intent_id: int | None = None) -> None:
        """Store handles and move the jobs from LAUNCHING to PENDING, in one transaction
        (which also closes the submission intent, if given)."""
        with self._checkpoint_in_background(len(launched) >= _BACKGROUND_CHECKPOINT_JOBS), self._write() as db:
            self._mark_launched(db, launched)
            if intent_id is not None:
                db.execute(_SQL.close_intent, (intent_id,))

    @staticmethod
    def _mark_launched(db: sqlite3.Connection, launched: Sequence[tuple[int, str, dict[str, Any], str | None]]
                       ) -> None:
        """Set-based but for the handles (issue 14: a sweep's 10,000 jobs are one launch): the
        history and the units' statuses are one statement per 500 launched ids, in id order,
        and nothing is read into Python first."""
        if not launched:
            return
        now = time.time()
        ids = sorted({job_id for job_id, *_ in launched})
        chunks = [ids[start : start + 500] for start in range(0, len(ids), 500)]
        # Before the update: only a job still LAUNCHING gets the PENDING event (marking twice appends nothing).
        for chunk in chunks:
            db.execute(_LAUNCHED_EVENTS.format(",".join("?" * len(chunk))), (now, *chunk))
        db.executemany(
            _SQL.mark_launched,
            # Encoded as the update goes: 10,000 handles' JSON is never held at once (3 MB at peak).
            ((kind, rows.dumps(handle), log, now, job_id) for job_id, kind, handle, log in launched),
        )
        for chunk in chunks:
            db.execute(_LAUNCHED_UNITS.format(",".join("?" * len(chunk))), chunk)

    def record_states(self, states: Sequence[tuple[int, JobState]], *, intent_id: int | None = None) -> None:
        with self._write() as db:
            self._record_states(db, states)
            if intent_id is not None:
                db.execute(_SQL.close_intent, (intent_id,))

    def _record_states(self, db: sqlite3.Connection, states: Sequence[tuple[int, JobState]]) -> None:
        if not states:
            return
        now = time.time()
        found = self._rows_by_id(db, [job_id for job_id, _ in states], "id, status, started_at, ended_at")
        updates, events = rows.state_changes(found, states, now, str(self.path))
        db.executemany(_SQL.record_state, updates)
        db.executemany(_SQL.insert_event, events)
        self._refresh_units(db, [job_id for job_id, _ in states])

    @staticmethod
    def _rows_by_id(db: sqlite3.Connection, job_ids: Sequence[int], columns: str) -> dict[int, sqlite3.Row]:
        found: dict[int, sqlite3.Row] = {}
        if len(job_ids) > 500:
            low, high = min(job_ids), max(job_ids)
            if high - low < 2 * len(job_ids):  # a launch's ids are dense: one range read, not one per 500
                wanted = set(job_ids)
                for row in db.execute(f"SELECT {columns} FROM jobs WHERE id BETWEEN ? AND ?", (low, high)):
                    if row["id"] in wanted:
                        found[row["id"]] = row
                return found
        for start in range(0, len(job_ids), 500):
            chunk = job_ids[start : start + 500]
            for row in db.execute(f"SELECT {columns} FROM jobs WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                found[row["id"]] = row
        return found

    def _refresh_units(self, db: sqlite3.Connection, job_ids: Sequence[int]) -> None:
        """Recompute the status of every work unit these jobs belong to."""
        found = self._rows_by_id(db, job_ids, "id, experiment_id, work_unit_id").values()
        self._refresh_unit_statuses(db, {(r["experiment_id"], r["work_unit_id"]) for r in found})

    @staticmethod
    def _refresh_unit_statuses(db: sqlite3.Connection, units: set[tuple[int, int]]) -> None:
        """Recompute the status of these work units from their jobs."""
        def job_statuses() -> Iterator[tuple[tuple[int, int], str]]:
            for experiment_id in {e for e, _ in units}:  # each experiment's units by one range read
                ids = sorted(u for e, u in units if e == experiment_id)
                for row in db.execute(
                    "SELECT work_unit_id, status FROM jobs WHERE experiment_id = ? AND work_unit_id BETWEEN ? AND ?",
                    (experiment_id, ids[0], ids[-1]),
                ):
                    yield (experiment_id, row[0]), row[1]

        # Consecutive units of one status are one range update: a launched sweep is one statement.
        runs: list[list[Any]] = []  # [status, experiment, first unit, last unit]
        for (e, u), status in sorted(rows.unit_statuses(units, job_statuses()).items()):
            last = runs[-1] if runs else None
            if last is not None and last[0] == status and last[1] == e and last[3] == u - 1:
                last[3] = u
            else:
                runs.append([status, e, u, u])
        db.executemany("UPDATE work_units SET status = ? WHERE experiment_id = ? AND id BETWEEN ? AND ?", runs)

    def work_units(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> list[WorkUnitRecord]:
        with self._reading():
            params: list[Any] = [experiment_id]
            filter_sql = ""
            if work_unit_ids is not None:
                filter_sql = f" AND id IN ({','.join('?' * len(work_unit_ids))})"
                params += list(work_unit_ids)
            units = {
                row["id"]: WorkUnitRecord(
                    experiment_id=experiment_id, id=row["id"], role=row["role"], args=_json_or_reason(row["args"]),
                    identity=row["identity"], created_at=row["created_at"],
                )
                for row in self._db.execute(
                    f"SELECT * FROM work_units WHERE experiment_id = ?{filter_sql} ORDER BY id", params
                )
            }
            job_filter = filter_sql.replace(" id IN", " work_unit_id IN")
            for row in self._db.execute(
                f"{specs.select_jobs(_JOB_COLUMNS)} WHERE jobs.experiment_id = ?{job_filter} ORDER BY jobs.id", params
            ):
                if row["work_unit_id"] in units:
                    units[row["work_unit_id"]].jobs.append(self._job(row))
            return list(units.values())

    def unit_rows(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        params: list[Any] = [experiment_id]
        unit_filter = ""
        if work_unit_ids is not None:
            unit_filter = f" AND id IN ({','.join('?' * len(work_unit_ids))})"
            params += list(work_unit_ids)
        job_filter = unit_filter.replace(" id IN", " work_unit_id IN")
        statuses = {s.value for s in Status}
        decoded = _Memo(_loads)  # a sweep's jobs often share their args or env text: decoded once

        def read_body(spec_id: int) -> str:
            found = self._db.execute("SELECT body FROM job_specs WHERE id = ?", (spec_id,)).fetchone()
            return found[0] if found else ""  # "": shown as unreadable, as any bad text

        bodies = _Memo(read_body)  # spec id -> its text: read once per distinct spec, not joined per row
        spec_values = _Memo(lambda spec_id: _shared_spec(bodies[spec_id]))  # spec id -> its shared decoded value

        with self._reading():
            cursor = self._db.cursor()
            cursor.row_factory = None  # plain tuples: no name lookups per field
            units = {
                row[0]: {"id": row[0], "role": row[1], "args": _json_or_reason(row[2], _loads), "identity": row[3],
                         "created_at": row[4], "jobs": []}
                for row in cursor.execute(
                    f"SELECT id, role, args, identity, created_at FROM work_units WHERE experiment_id = ?{unit_filter}"
                    " ORDER BY id", params)
            }
            # by unit, then id: each unit's jobs in id order as before, in the jobs_by_unit index's own
            # order (ORDER BY id alone sorted every row, specs' ids and handles included, in a temp B-tree)
            for row in cursor.execute(
                f"SELECT {', '.join(_STORED_COLUMNS)} FROM jobs WHERE experiment_id = ?{job_filter}"
                " ORDER BY work_unit_id, id", params
            ):
                unit = units.get(row[2])
                if unit is None:
                    continue
                (job_id, experiment, work_unit, name, executor_kind, executor, executable, args, env, status, message,
                 exit_code, handle_kind, handle, log_path, created_at, launched_at, started_at, ended_at) = row
                try:
                    if status not in statuses:
                        raise ValueError(f"{status!r} is not a valid Status")
                    job = {  # JobRecord's fields, in its order
                        "id": job_id, "experiment_id": experiment, "work_unit_id": work_unit, "name": name,
                        "executor_kind": executor_kind, "executor": spec_values[executor],
                        "executable": spec_values[executable], "args": decoded[args], "env": decoded[env],
                        "status": status, "message": message, "exit_code": exit_code, "handle_kind": handle_kind,
                        "handle": _loads(handle) if handle else None, "log_path": log_path,
                        "created_at": created_at, "launched_at": launched_at, "started_at": started_at,
                        "ended_at": ended_at,
                    }
                except Exception:  # noqa: BLE001 - the record path says why, for this row only
                    fields = dict(zip(_COPIED_COLUMNS, row, strict=True))
                    fields["executor"], fields["executable"] = bodies[executor], bodies[executable]
                    record = self._job(fields)  # type: ignore[arg-type]
                    job = {field: getattr(record, field) for field in _COPIED_COLUMNS}
                    job["status"] = record.status.value
                unit["jobs"].append(job)
            return list(units.values())

    def unit_summaries(self, experiment_id: int) -> list[UnitSummary]:
        query = (
            "SELECT w.id, w.role, w.args, w.status, w.created_at, MIN(j.started_at),"
            " CASE WHEN COUNT(j.id) > 0 AND COUNT(j.ended_at) = COUNT(j.id) THEN MAX(j.ended_at) END,"
            " GROUP_CONCAT(CASE WHEN j.status != 'COMPLETED' AND j.message != '' THEN j.message END, '; ')"
            " FROM work_units w LEFT JOIN jobs j ON j.experiment_id = w.experiment_id AND j.work_unit_id = w.id"
            " WHERE w.experiment_id = ? GROUP BY w.id ORDER BY w.id"
        )
        statuses = {s.value: s for s in Status}
        with self._reading():
            return [
                UnitSummary(row[0], row[1], _json_or_reason(row[2]), statuses.get(row[3], Status.UNKNOWN),
                            _number(row[4]), row[5], row[6], row[7] or "")
                for row in self._db.execute(query, (experiment_id,))
            ]

    def active_jobs(self, experiment_ids: Sequence[int]) -> list[JobRecord]:
        marks = ",".join("?" * len(experiment_ids))
        active = [s.value for s in Status if s.is_active]
        with self._reading():
            return [
                self._job(row)
                for row in self._db.execute(
                    f"SELECT {rows.LIGHT_JOB_COLUMNS} FROM jobs WHERE experiment_id IN ({marks})"
                    f" AND status IN ({','.join('?' * len(active))})",
                    [*experiment_ids, *active],
                )
            ]

    def job_statuses(self, experiment_id: int,
                     work_unit_ids: Sequence[int] | None = None) -> list[tuple[int, str, int | None, str | None]]:
        params: list[Any] = [experiment_id]
        unit_filter = ""
        if work_unit_ids is not None:
            unit_filter = f" AND u.id IN ({','.join('?' * len(work_unit_ids))})"
            params += list(work_unit_ids)
        with self._reading():
            cursor = self._db.cursor()
            cursor.row_factory = None  # plain tuples
            return cursor.execute(
                "SELECT u.id, u.role, j.id, j.status FROM work_units u LEFT JOIN jobs j"
                " ON j.experiment_id = u.experiment_id AND j.work_unit_id = u.id"
                f" WHERE u.experiment_id = ?{unit_filter} ORDER BY u.id, j.id", params).fetchall()

    def job_history(self, job_id: int) -> list[StatusEvent]:
        with self._reading():
            return [rows.status_event(r)
                    for r in self._db.execute("SELECT * FROM job_events WHERE job_id = ? ORDER BY rowid", (job_id,))]

    @staticmethod
    def _job(row: sqlite3.Row) -> JobRecord:
        try:
            return rows.job_record(row, _shared_spec)
        except Exception as exc:  # noqa: BLE001 - one bad row must not hide the others
            return JobRecord(
                id=row["id"], experiment_id=row["experiment_id"], work_unit_id=row["work_unit_id"],
                name=str(row["name"]), executor_kind=str(row["executor_kind"]), executor={}, executable={},
                args=[], env={}, status=Status.UNKNOWN, message=records.unreadable(exc),
                created_at=_number(row["created_at"]),
            )

    # -- launcher leases -----------------------------------------------------------------

    def open_lease(self, experiment_id: int, host: str, pid: int, proc_start: float | None) -> int:
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO launch_leases (experiment_id, host, pid, proc_start, heartbeat) VALUES (?,?,?,?,?)",
                (experiment_id, host, pid, proc_start, time.time()),
            )
            return int(cursor.lastrowid or 0)

    def heartbeat(self, lease_id: int) -> None:
        with self._write() as db:
            db.execute("UPDATE launch_leases SET heartbeat = ? WHERE id = ?", (time.time(), lease_id))

    def close_lease(self, lease_id: int) -> None:
        with self._write() as db:
            db.execute("DELETE FROM launch_intents WHERE lease_id = ?", (lease_id,))
            db.execute("DELETE FROM launch_leases WHERE id = ?", (lease_id,))

    def begin_intent(self, lease_id: int, executor_kind: str, job_ids: Sequence[int]) -> int:
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO launch_intents (lease_id, executor_kind, job_ids, created_at) VALUES (?,?,?,?)",
                (lease_id, executor_kind, json.dumps(list(job_ids)), time.time()),
            )
            return int(cursor.lastrowid or 0)

    def leases(self) -> list[LeaseRecord]:
        with self._lock:
            return [rows.lease_record(r) for r in self._db.execute("SELECT * FROM launch_leases ORDER BY id")]

    def claim_lease(self, lease: LeaseRecord, host: str, pid: int, proc_start: float | None) -> bool:
        with self._write() as db:
            cursor = db.execute(
                _SQL.claim_lease,
                (host, pid, proc_start, time.time(), lease.id, lease.pid, lease.host, lease.heartbeat),
            )
            return cursor.rowcount == 1

    def lease_orphans(self, lease_id: int) -> tuple[list[tuple[str, list[JobRecord]]], list[JobRecord]]:
        with self._lock:
            jobs = {
                row["id"]: self._job(row)
                for row in self._db.execute(
                    f"{specs.select_jobs(_JOB_COLUMNS)} WHERE jobs.lease_id = ? AND jobs.status = 'LAUNCHING'"
                    " AND jobs.handle IS NULL", (lease_id,)
                )
            }
            return rows.orphans_by_intent(
                jobs, self._db.execute("SELECT * FROM launch_intents WHERE lease_id = ? ORDER BY id", (lease_id,)))

    def resolve_lease(self, lease_id: int, launched: Sequence[tuple[int, str, dict[str, Any], str | None]],
                      failed: Sequence[tuple[int, JobState]], launch_error: str) -> None:
        with self._write() as db:
            self._mark_launched(db, launched)
            self._record_states(db, failed)
            row = db.execute("SELECT experiment_id FROM launch_leases WHERE id = ?", (lease_id,)).fetchone()
            if row is not None and launch_error:
                db.execute(_SQL.launch_failed, (launch_error, row[0]))
            db.execute("DELETE FROM launch_intents WHERE lease_id = ?", (lease_id,))
            db.execute("DELETE FROM launch_leases WHERE id = ?", (lease_id,))

    # -- the store itself ----------------------------------------------------------------

    def info(self) -> StoreInfo:
        with self._lock:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            store_id = self._db.execute("SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()[0]
            counts = [self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                      for table in ("experiments", "work_units", "jobs", "job_events")]
        return StoreInfo(f"sqlite:///{self.path}", "sqlite", version, SCHEMA_VERSION, store_id, *counts)

    def export_history(self, experiment_id: int) -> ExperimentHistory:
        with self._lock:
            record = self.get_experiment(experiment_id)
            origin = self._db.execute("SELECT origin FROM experiments WHERE id = ?", (experiment_id,)).fetchone()[0]
            store_id = self._db.execute("SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()[0]
            events = rows.events_by_job(self._db.execute(
                "SELECT e.* FROM job_events e JOIN jobs j ON j.id = e.job_id WHERE j.experiment_id = ?"
                " ORDER BY e.rowid", (experiment_id,)))
            results = [(r[0], r[1], r[2], r[3]) for r in self._db.execute(
                "SELECT job_id, name, value, at FROM job_results WHERE experiment_id = ? ORDER BY at, job_id, name",
                (experiment_id,))]
            final = {r[0]: r[1] for r in self._db.execute(
                "SELECT id, results_at FROM jobs WHERE experiment_id = ? AND results_at IS NOT NULL",
                (experiment_id,))}
            links = [(r[0], r[1], r[2]) for r in self._db.execute(
                "SELECT job_id, name, url FROM job_links WHERE experiment_id = ? ORDER BY job_id, name",
                (experiment_id,))]
            return ExperimentHistory(record, self.work_units(experiment_id), events,
                                     origin or f"{store_id}/{experiment_id}", results, final, links)

    def import_history(self, history: ExperimentHistory) -> Imported:
        source = history.experiment
        with self._write() as db:
            store_id = db.execute("SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()[0]
            home, _, home_id = history.origin.partition("/")
            if db.execute("SELECT 1 FROM experiments WHERE origin = ?", (history.origin,)).fetchone() or (
                home == store_id and db.execute("SELECT 1 FROM experiments WHERE id = ?", (int(home_id),)).fetchone()
            ):
                return Imported(source.id, None)
            taken = db.execute("SELECT 1 FROM experiments WHERE id = ?", (source.id,)).fetchone()
            cursor = db.execute(
                "INSERT INTO experiments (id, title, tags, notes, script_path, script_sha256, git_commit, git_dirty,"
                " user, host, created_at, launch_status, launch_error, origin) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows.copied_experiment_values(source, None if taken else source.id, history.origin),
            )
            experiment_id = int(cursor.lastrowid or 0)
            jobs = [job for unit in history.units for job in unit.jobs]
            clash = bool(jobs) and bool(self._rows_by_id(db, [j.id for j in jobs], "id"))
            new_ids: dict[int, int] = {}
            spec = self._spec_ids(db).of
            for unit in history.units:
                db.execute(_SQL.copy_unit, rows.copied_unit_values(unit, experiment_id))
                for job in unit.jobs:
                    values = rows.copied_job_values(job, experiment_id, spec)
                    cursor = db.execute(  # a copied job has no launcher lease here
                        f"INSERT INTO jobs ({', '.join(_STORED_COLUMNS)})"
                        f" VALUES ({','.join('?' * len(_STORED_COLUMNS))})",
                        (None if clash else job.id, *values[1:]),
                    )
                    new_ids[job.id] = int(cursor.lastrowid or 0)
                    db.executemany(_SQL.insert_event, rows.copied_events(history, job.id, new_ids[job.id]))
            final, results, links = rows.copied_extras(history, new_ids, experiment_id)
            db.executemany(_SQL.set_results_at, final)
            db.executemany(_SQL.insert_result, results)
            db.executemany(_SQL.insert_link, links)
        return Imported(source.id, experiment_id, clash)

    # -- results and links ---------------------------------------------------------------

    def record_results(self, job_id: int, results: Mapping[str, float | None], *, final: bool = False) -> None:
        now = time.time()
        with self._write() as db:
            row = db.execute("SELECT experiment_id, work_unit_id FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"No job {job_id} in {self.path}.")
            db.executemany(
                _SQL.upsert_result,
                [(job_id, row[0], row[1], name, value, now) for name, value in results.items()],
            )
            if final:
                db.execute(_SQL.set_results_at, (now, job_id))

    def results(self, experiment_id: int,
                work_unit_ids: Sequence[int] | None = None) -> dict[int, dict[str, float | None]]:
        return self._named_by_unit("SELECT work_unit_id, name, value FROM job_results", "at, job_id",
                                   experiment_id, work_unit_ids)

    def results_pending(self, experiment_id: int) -> list[int]:
        terminal = [s.value for s in Status if s.is_terminal]
        with self._reading():
            return [r[0] for r in self._db.execute(
                f"SELECT id FROM jobs WHERE experiment_id = ? AND results_at IS NULL AND handle IS NOT NULL"
                f" AND status IN ({','.join('?' * len(terminal))}) ORDER BY id", [experiment_id, *terminal])]

    def record_links(self, links: Sequence[tuple[int, str, str]]) -> None:
        if not links:
            return
        with self._write() as db:
            db.executemany(
                _SQL.link_job,
                [(name, url, job_id) for job_id, name, url in links],
            )

    def links(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> dict[int, dict[str, str]]:
        return self._named_by_unit("SELECT work_unit_id, name, url FROM job_links", "job_id, name",
                                   experiment_id, work_unit_ids)

    def _named_by_unit(self, select: str, order: str, experiment_id: int,
                       work_unit_ids: Sequence[int] | None) -> dict[int, dict[str, Any]]:
        """``{work unit: {name: value}}`` from ``select``'s (work_unit_id, name, value) rows of one
        experiment (of some of its units), in ``order``: a later row of a name wins."""
        params: list[Any] = [experiment_id]
        where = ""
        if work_unit_ids is not None:
            where = f" AND work_unit_id IN ({','.join('?' * len(work_unit_ids))})"
            params += list(work_unit_ids)
        found: dict[int, dict[str, Any]] = {}
        with self._reading():
            cursor = self._db.cursor()
            cursor.row_factory = None  # plain tuples: a sweep has a result or a link per job
            query = f"{select} WHERE experiment_id = ?{where} ORDER BY {order}"
            for unit, name, value in cursor.execute(query, params):
                named = found.get(unit)
                if named is None:
                    named = found[unit] = {}
                named[name] = value
        return found


class _Memo(dict[Any, Any]):
    """A dict that makes a missing key's value once, with ``make``: a hit is a plain dict lookup
    (no Python call per row), so a sweep's shared texts and specs are read and decoded once."""

    def __init__(self, make: Callable[[Any], Any]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self._make(key)
        return value


@functools.lru_cache(maxsize=64)
def _rows_statement(insert: str, count: int) -> str:
    """``insert`` (one row's ``INSERT ... VALUES (?, ...)``) for ``count`` rows at once."""
    head, _, row = insert.partition(" VALUES ")
    return f"{head} VALUES {', '.join([row] * count)}"


def _insert_rows(db: sqlite3.Connection, insert: str, values: Sequence[tuple[Any, ...]], most: int = 256) -> None:
    """``db.executemany(insert, values)`` as a few multi-row INSERTs of up to ``most`` rows.

    sqlite3 lets go of the GIL around each statement step, so ``executemany`` of a group's
    256 rows hands the GIL over 256 times while the script adds on the main thread; every
    hand-over wakes the other thread and costs both CPU (issue 14: a tenth of a 10,000-unit
    sweep's). One statement of many rows lets go of it once."""
    if not values:
        return
    width = len(values[0])
    most = max(1, min(most, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    for start in range(0, len(values), most):
        chunk = values[start : start + most]
        db.execute(_rows_statement(insert, len(chunk)), [value for row in chunk for value in row])


def _add_functions(db: sqlite3.Connection) -> None:
    """SQL functions the migrations use: ``xcore_digest(text)``, a spec's key (xcore.store.specs)."""
    db.create_function("xcore_digest", 1, specs.digest, deterministic=True)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _json_or_reason(text: Any, loads: Any = json.loads) -> Any:
    """A stored JSON value, or the reason it cannot be read (shown where the value would be)."""
    try:
        return loads(text)
    except Exception as exc:  # noqa: BLE001 - shown in place of the value
        return f"<{records.unreadable(exc)}>"


_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """``json.loads`` of a stored value, through the C scanner without the Python wrapper
    around it (a quarter of the time for the small values jobs hold: 40,000 of them for
    ``xcore show`` of 10,000 jobs). Anything unusual (whitespace, trailing text, an error)
    goes to ``json.loads``, which decides and explains."""
    try:
        value, end = _scan(text, 0)
    except Exception:  # noqa: BLE001 - json.loads raises the real error
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


@functools.lru_cache(maxsize=256)
def _shared_spec(text: str) -> Any:
    """An executor or executable decoded once per distinct text: a sweep's 10,000 jobs share
    one executor, and reading them for ``xcore show`` held 10,000 equal copies (issue 14).
    The records share the dict, so it is read-only, as every stored spec is."""
    return json.loads(text)


def open_url(url: str, *, migrate: bool = True) -> SqliteStore:
    """The store a ``sqlite:`` URL names. SQLAlchemy's spelling: sqlite:///relative.db and
    sqlite:////absolute/path.db."""
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url.removeprefix("sqlite:")
    if not path:
        raise ValueError(f"XCORE_STORE={url!r} names no file: write sqlite:////absolute/path/xcore.db.")
    return SqliteStore(path, migrate=migrate)
