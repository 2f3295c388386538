"""The embedded metadata store: one SQLite file, safe for many processes at once (the SQL store
of ``xcore.store.sql`` over the SQLite dialect here).

WAL journaling lets readers run while a launcher writes; every write is one ``BEGIN IMMEDIATE``
transaction, so concurrent launchers queue (waiting up to ``XCORE_STORE_BUSY_TIMEOUT`` seconds,
default 120) instead of failing, and ids are drawn while that write lock is held. The schema
is versioned with ``PRAGMA user_version`` and migrated forward on open. A new file is created
whole and private (0600, in a 0700 directory when xcore makes it). ``:memory:`` is a store of
this process alone (``xcore.testing.InMemoryStore``).
"""

from __future__ import annotations

import contextlib
import functools
import json  # noqa: F401 - tests count the JSON the store encodes through xcore.store.sqlite.json
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from xcore import paths
from xcore.errors import StoreError, StoreFullError
from xcore.settings import env_number
from xcore.store import schema
from xcore.store.dialect import Cursor, Dialect, T, Work
from xcore.store.migrations import SCHEMA_VERSION
from xcore.store.specs import KnownSpecs, digest
from xcore.store.sql import SqlStore

MIGRATIONS: list[str] = schema.migrations(schema.SQLITE)

_AUTOCHECKPOINT_PAGES = 1000  # SQLite's default


class SqliteDialect(Dialect):
    backend = "sqlite"
    event_order = "rowid"
    chunk = 500  # values per IN list: SQLite before 3.32 takes at most 999 parameters per statement
    find = "instr"
    has_tag = "EXISTS (SELECT 1 FROM json_each(experiments.tags) WHERE value = ?)"
    messages = "GROUP_CONCAT({}, '; ')"
    migrations = MIGRATIONS
    set_version = "PRAGMA user_version = {}"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self.url = f"sqlite:///{path}"
        self.memory = str(path) == ":memory:"
        self._lock = threading.RLock()
        self._in_transaction = False  # inside group(): writes join it instead of committing
        self.checkpointer: threading.Thread | None = None  # see large_write
        if not self.memory:
            self._prepare_file()
        busy = env_number("XCORE_STORE_BUSY_TIMEOUT", 120)  # seconds a writer waits for the lock
        with self._errors("open"):
            self.db = sqlite3.connect(path, timeout=busy, isolation_level=None, check_same_thread=False)
            self.db.row_factory = sqlite3.Row
            self.db.execute(f"PRAGMA busy_timeout = {int(busy * 1000)}")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute("PRAGMA foreign_keys = ON")

    # -- the file --------------------------------------------------------------------------

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
        if not info.st_mode & stat.S_IWUSR:  # made read-only on purpose: never chmod it back
            raise StoreError(
                f"The metadata store {self.path} is read-only (mode {stat.S_IMODE(info.st_mode):04o}); xcore "
                f"leaves its permissions alone. To use it, make it writable (chmod u+w {self.path}), or set "
                f"XCORE_STORE to another store."
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
                    self.execute_script(db, migration)
                db.execute(self.set_version.format(SCHEMA_VERSION))
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
                try:
                    Path(f"{tmp}{suffix}").unlink(missing_ok=True)
                except OSError:  # a read-only file system: nothing was made, and the error above says why
                    pass

    # -- what errors mean ------------------------------------------------------------------

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
            raise (StoreFullError if self._full(exc) else StoreError)(self._explain(exc, action)) from exc

    def _full(self, exc: sqlite3.Error) -> bool:
        """Whether SQLite failed for want of disk space (as ``_explain`` tells it)."""
        lowered = str(exc).lower()
        if "readonly" in lowered or "read-only" in lowered:
            return False
        return "full" in lowered or (("i/o" in lowered or "unable to open" in lowered) and self._disk_full())

    # -- transactions ----------------------------------------------------------------------

    def run(self, work: Work[T], *, write: bool, specs: KnownSpecs) -> T:
        """A read runs as it is (WAL: it never waits for a writer); a write is one ``BEGIN
        IMMEDIATE`` transaction (it waits for the write lock up to the busy timeout), or part
        of the ``group`` around it. SQLite never loses a commit's reply: no retries."""
        if write:
            with self.group(specs):
                return work(self.db.cursor(), False)
        with self._lock, self._errors("read"):
            return work(self.db.cursor(), False)

    @contextmanager
    def group(self, specs: KnownSpecs) -> Iterator[None]:
        with self._lock, self._errors("write"):
            if self._in_transaction:  # inside another group: its end commits
                yield
                return
            self.db.execute("BEGIN IMMEDIATE")
            self._in_transaction = True  # read only by the thread holding self._lock
            try:
                yield
                self.db.execute("COMMIT")
            except BaseException:
                specs.discarded()
                with contextlib.suppress(sqlite3.Error):  # SQLite rolled back already (e.g. disk full)
                    self.db.execute("ROLLBACK")
                raise
            finally:
                self._in_transaction = False
            specs.committed()

    @contextmanager
    def migrating(self) -> Iterator[None]:
        """Foreign keys off (they cannot change inside a transaction): rebuilding ``jobs`` drops
        the table the status history, results and links name. The rebuild keeps every job and
        its id, so they name the same rows after it (the migration counts them)."""
        with self._lock, self._errors("open"):
            _add_functions(self.db)
            self.db.execute("PRAGMA foreign_keys = OFF")
            try:
                yield
            finally:
                self.db.execute("PRAGMA foreign_keys = ON")

    def execute_script(self, cursor: Cursor, script: str) -> None:
        for statement in script.split(";"):  # sqlite3 runs one statement per call
            if statement.strip():
                cursor.execute(statement)

    def schema_version(self, cursor: Cursor) -> int:
        return int(cursor.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        self._join_checkpointer()
        with self._lock:
            self.db.close()

    # -- the background checkpoint of a large write -----------------------------------------

    @contextmanager
    def large_write(self, large: bool) -> Iterator[None]:
        """For a large write (``mark_launched`` of a sweep: 10,000 jobs write 6.5 MB to the WAL):
        its commit skips SQLite's automatic checkpoint, which would copy the WAL into the
        database file and wait for two fsyncs (60-90 ms at 10,000 jobs) before the launcher
        could go on; a thread then runs the same checkpoint on a connection of its own while
        the launcher settles its futures, closes its lease and reports. The commit itself is
        the same (in the WAL, as durable as any commit with ``synchronous = NORMAL``). The
        automatic checkpoints stay off until that thread is done (a small commit meanwhile
        would otherwise do the whole checkpoint itself). The thread is not a daemon: the
        interpreter waits for it before exiting (and ``close`` joins it), so the next command
        finds the WAL checkpointed, as before."""
        if not large or self._in_transaction or self.memory:  # inside group(): its commit checkpoints as usual
            yield
            return
        self._join_checkpointer()
        with self._lock:
            self.db.execute("PRAGMA wal_autocheckpoint = 0")
        started = False
        try:
            yield
            self.checkpointer = threading.Thread(target=self._checkpoint, name="xcore-checkpoint")
            self.checkpointer.start()
            started = True
        finally:
            if not started:
                self._automatic_checkpoints()

    def _join_checkpointer(self) -> None:
        if self.checkpointer is not None and self.checkpointer is not threading.current_thread():
            self.checkpointer.join()

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
            self.db.execute(f"PRAGMA wal_autocheckpoint = {_AUTOCHECKPOINT_PAGES}")

    # -- rows and ids ----------------------------------------------------------------------

    def plain(self, cursor: Cursor) -> Cursor:
        plain = self.db.cursor()
        plain.row_factory = None
        return plain

    def insert_id(self, cursor: Cursor, sql: str, params: Sequence[Any]) -> int:
        return int(cursor.execute(sql, params).lastrowid or 0)

    def draw_job_ids(self, cursor: Cursor, count: int) -> list[int]:
        """Past the table's AUTOINCREMENT counter (and its highest id), while the write lock is held."""
        seq = cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'").fetchone()
        top = cursor.execute("SELECT MAX(id) FROM jobs").fetchone()[0]
        first = max(seq[0] if seq else 0, top or 0) + 1
        return list(range(first, first + count))

    def insert_rows(self, cursor: Cursor, sql: str, rows: Sequence[Sequence[Any]], most: int = 256) -> None:
        """A few multi-row INSERTs of up to ``most`` rows.

        sqlite3 lets go of the GIL around each statement step, so ``executemany`` of a group's
        256 rows hands the GIL over 256 times while the script adds on the main thread; every
        hand-over wakes the other thread and costs both CPU (issue 14: a tenth of a 10,000-unit
        sweep's). One statement of many rows lets go of it once."""
        if not rows:
            return
        most = max(1, min(most, self.db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(rows[0])))
        for start in range(0, len(rows), most):
            chunk = rows[start : start + most]
            cursor.execute(_rows_statement(sql, len(chunk)), [value for row in chunk for value in row])


class SqliteStore(SqlStore):
    """The store in the SQLite file at ``path`` (created, or migrated forward, on open)."""

    dialect: SqliteDialect
    writes_in_background = False  # its writes are CPU work in this process (MetadataStore.writes_in_background)

    def __init__(self, path: str | Path, *, migrate: bool = True) -> None:
        self.path = Path(path)
        super().__init__(SqliteDialect(self.path), migrate=migrate)

    @property
    def _db(self) -> sqlite3.Connection:
        return self.dialect.db

    def change_marker(self) -> tuple[int, int] | None:
        """SQLite's count of commits by other connections (``PRAGMA data_version``) with this
        connection's own changes: equal twice, nothing in the file was written between."""
        with self.dialect._lock:
            return self._db.execute("PRAGMA data_version").fetchone()[0], self._db.total_changes


@functools.lru_cache(maxsize=64)
def _rows_statement(insert: str, count: int) -> str:
    """``insert`` (one row's ``INSERT ... VALUES (?, ...)``) for ``count`` rows at once."""
    head, _, row = insert.partition(" VALUES ")
    return f"{head} VALUES {', '.join([row] * count)}"


def _add_functions(db: sqlite3.Connection) -> None:
    """SQL functions the migrations use: ``xcore_digest(text)``, a spec's key (xcore.store.specs)."""
    db.create_function("xcore_digest", 1, digest, deterministic=True)


def open_url(url: str, *, migrate: bool = True) -> SqliteStore:
    """The store a ``sqlite:`` URL names. SQLAlchemy's spelling: sqlite:///relative.db and
    sqlite:////absolute/path.db."""
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url.removeprefix("sqlite:")
    if not path:
        raise ValueError(f"XCORE_STORE={url!r} names no file: write sqlite:////absolute/path/xcore.db.")
    return SqliteStore(path, migrate=migrate)

