"""The team metadata store: the same tables as the SQLite store, on a PostgreSQL server (the SQL
store of ``xcore.store.sql`` over the PostgreSQL dialect here).

Opened for ``XCORE_STORE=postgresql://...`` (psycopg 3, the ``xcore[postgres]`` extra, imported
only here). Connection settings come from the URL, the ``PG*`` environment variables and
``~/.pgpass`` exactly as libpq reads them; TLS options (``?sslmode=verify-full&sslrootcert=...``)
pass through. The password never reaches any message: URLs are shown redacted.

Where SQLite has one write lock for the whole file, PostgreSQL locks less: experiment ids are
allocated under a transaction-scoped advisory lock (no gaps), and jobs a poller records are
locked ``FOR UPDATE`` in id order. A dropped connection or a restarting server is retried until
``XCORE_STORE_RETRY_SECS`` (default 60 s) passes, each retry first looking for its own earlier
commit (see ``xcore.store.sql``); then the caller gets ``StoreUnavailableError``.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from xcore.errors import ConfigurationError, XcoreError
from xcore.settings import env_number
from xcore.store import pgwire, schema, statements
from xcore.store.dialect import Cursor, Dialect, T, Work
from xcore.store.redaction import redact_text, redact_url
from xcore.store.specs import KnownSpecs
from xcore.store.sql import SqlStore

if TYPE_CHECKING:
    import psycopg

MIGRATIONS: list[str] = schema.migrations(schema.POSTGRES)

_EXPERIMENT_LOCK = 0x78636F7265  # advisory lock key ("xcore"): held while allocating experiment ids
_MIGRATION_LOCK = _EXPERIMENT_LOCK + 1
# Connection loss, server shutdown/startup, serialization failure and deadlock: worth retrying.
_TRANSIENT = ("connection refused", "server closed the connection", "starting up", "shutting down",
              "terminating connection", "could not receive data", "could not send data", "connection reset",
              "timeout expired", "no such file or directory", "consuming input failed", "connection is lost",
              "connection is closed", "ssl syscall error", "eof detected", "broken pipe", "in recovery")
_RETRY_SQLSTATES = {"57P01", "57P02", "57P03", "08000", "08001", "08003", "08004", "08006", "40001", "40P01"}


class StoreUnavailableError(XcoreError):
    """The PostgreSQL server could not be reached or kept failing until the retry deadline."""


@functools.cache
def _cursor_class() -> type:
    """psycopg's cursor taking the store's ``?`` placeholders (``%s`` to psycopg); psycopg is
    imported here, on the first write (or read the light client leaves to it), not with the module."""
    import psycopg

    class _Cursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            return super().execute(_placeholders(query) if params is not None else query, params, **options)

        def executemany(self, query: Any, params_seq: Any, **options: Any) -> None:
            super().executemany(_placeholders(query), params_seq, **options)

    return _Cursor


@functools.lru_cache(maxsize=512)
def _placeholders(query: str) -> str:
    return query.replace("%", "%%").replace("?", "%s")


class PostgresDialect(Dialect):
    backend = "postgresql"
    for_update = " FOR UPDATE"
    migrations = MIGRATIONS
    set_version = "UPDATE schema_version SET version = {}"
    lock_jobs = "LOCK TABLE jobs IN SHARE MODE"  # launchers of an older xcore may still write

    def __init__(self, url: str, retry_secs: float) -> None:
        self.url = self.where = redact_url(url)
        self._conninfo = url
        self._lock = threading.RLock()
        self.conn: psycopg.Connection[Any] | None = None
        self._light_params = pgwire.params_for(url)  # None: every read goes through psycopg too
        self._light: pgwire.Connection | None = None
        self.retry_secs = retry_secs
        self.retries = 0  # how many times a transaction was retried (tests and benchmarks read it)

    @functools.cached_property
    def _password(self) -> str | None:
        return _password_of(self._conninfo)

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg
        from psycopg.rows import dict_row

        try:
            conn = psycopg.connect(self._conninfo, autocommit=True, row_factory=dict_row,
                                   cursor_factory=_cursor_class(), connect_timeout=10, application_name="xcore")
        except psycopg.Error as exc:
            raise self._error(exc, "cannot connect to") from None
        self.conn = conn
        return conn

    def _error(self, exc: BaseException, doing: str) -> XcoreError:
        """A one-line error naming the store (redacted) and what the server said."""
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        detail = redact_text(redact_url(detail), [self._password] if self._password else [])
        detail = re.sub(r"(password\s*=\s*)\S+", r"\1<redacted>", detail, flags=re.IGNORECASE)
        cls = StoreUnavailableError if _retryable(exc) else ConfigurationError
        hint = ""
        if "password authentication failed" in detail or "no password supplied" in detail:
            hint = " Check the user and password (in the URL, PGPASSWORD or ~/.pgpass)."
        elif cls is StoreUnavailableError:
            hint = f" Is the server up? (retried for {self.retry_secs:g} s; XCORE_STORE_RETRY_SECS sets how long)"
        return cls(f"The metadata store {self.url} {doing} the server: {detail}.{hint}")

    def run(self, work: Work[T], *, write: bool, specs: KnownSpecs) -> T:
        """Every call, read or write, is one transaction; on a lost connection reconnect and run
        it again (``retrying=True``: it must first look for its own earlier commit). A read goes
        to the light client (``xcore.store.pgwire``) while it serves, else to psycopg."""
        if not write and self._light_params is not None:
            with self._lock:
                found, result = self._light_read(work, specs)
            if found:
                return result  # type: ignore[return-value]  # found: the work's own result
        import psycopg
        from psycopg import errors as pg_errors

        deadline = time.monotonic() + self.retry_secs
        retrying = False
        delay = 0.05
        with self._lock:
            while True:
                try:
                    conn = self.conn if self.conn is not None and not self.conn.closed else self._connect()
                    try:
                        with conn.transaction(), conn.cursor() as cursor:
                            result = work(cursor, retrying)
                    except BaseException:
                        specs.discarded()
                        raise
                    specs.committed()
                    return result
                except (psycopg.OperationalError, pg_errors.SerializationFailure, pg_errors.DeadlockDetected,
                        StoreUnavailableError) as exc:
                    if not _retryable(exc) or time.monotonic() + delay > deadline:
                        if isinstance(exc, XcoreError):
                            raise
                        raise self._error(exc, "lost its connection to" if _retryable(exc) else "got an error from"
                                          ) from None
                    if self.conn is not None and self.conn.broken:
                        self.conn.close()
                    self.retries += 1
                    retrying = True
                    time.sleep(delay)
                    delay = min(delay * 2, 1.0)
                except (pg_errors.UniqueViolation, pg_errors.ForeignKeyViolation) as exc:
                    # e.g. a work unit id recorded twice: the caller's mistake, as with SQLite
                    raise ValueError(redact_text(str(exc).splitlines()[0], [self._password or ""])) from None

    def _light_read(self, work: Work[T], specs: KnownSpecs) -> tuple[bool, T | None]:
        """``(True, result)`` of ``work`` on the light client, or ``(False, None)`` when it cannot
        serve (psycopg then runs the read; the light client is not tried again)."""
        try:
            if self._light is None or self._light.closed:
                assert self._light_params is not None
                self._light = pgwire.Connection(self._light_params)
            self._light.simple("BEGIN READ ONLY", later=True)  # sent with the first statement
            try:
                result = work(pgwire.Cursor(self._light), False)
            except BaseException:
                specs.discarded()
                raise
            self._light.simple("COMMIT")
        except pgwire.Fallback:
            specs.discarded()
            self._light_params = None
            if self._light is not None:
                self._light.close()
            self._light = None
            return False, None
        except BaseException:
            if self._light is not None and not self._light.closed:
                try:
                    self._light.simple("ROLLBACK")
                except pgwire.Fallback:
                    self._light.close()
            raise
        specs.committed()
        return True, result

    def schema_version(self, cursor: Cursor) -> int:
        # A catalog query (not to_regclass, whose cache may predate a concurrent migration).
        if not cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE tablename = 'schema_version'"
                              " AND schemaname = current_schema()) AS present").fetchone()["present"]:
            return 0
        row = cursor.execute("SELECT version FROM schema_version").fetchone()
        return int(row["version"]) if row else 0

    def lock_schema(self, cursor: Cursor) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))

    def plain(self, cursor: Cursor) -> Cursor:
        if isinstance(cursor, pgwire.Cursor):
            return cursor.plain()
        from psycopg.rows import tuple_row

        return cursor.connection.cursor(row_factory=tuple_row)

    def one_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    def insert_id(self, cursor: Cursor, sql: str, params: Sequence[Any]) -> int:
        return int(cursor.execute(f"{sql} RETURNING id", params).fetchone()["id"])

    def insert_job(self, cursor: Cursor, values: Sequence[Any], now: float) -> int:
        """The job and its first event in one statement: one round trip per job."""
        return int(cursor.execute(
            f"WITH j AS ({statements.INSERT_JOB} RETURNING id) INSERT INTO job_events (job_id, status, at)"
            " SELECT id, 'LAUNCHING', ? FROM j RETURNING job_id", (*values, now)).fetchone()["job_id"])

    def draw_job_ids(self, cursor: Cursor, count: int) -> list[int]:
        return sorted(int(r["id"]) for r in cursor.execute(
            "SELECT nextval(pg_get_serial_sequence('jobs', 'id')) AS id FROM generate_series(1, ?)", (count,)))

    def lock_experiments(self, cursor: Cursor) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(?)", (_EXPERIMENT_LOCK,))

    def keep_job_ids(self, cursor: Cursor, top: int) -> None:
        """Move the id sequence past the ids kept, so no launcher is handed one of them."""
        cursor.execute("SELECT setval(s, GREATEST(COALESCE(pg_sequence_last_value(s), 0), ?))"
                       " FROM CAST(pg_get_serial_sequence('jobs', 'id') AS regclass) AS s", (top,))

    def close(self) -> None:
        with self._lock:
            if self._light is not None:
                self._light.close()
            if self.conn is not None:
                self.conn.close()


class PostgresStore(SqlStore):
    """The store on the PostgreSQL server ``url`` names (a libpq URL)."""

    dialect: PostgresDialect

    def __init__(self, url: str, *, migrate: bool = False, retry_secs: float | None = None) -> None:
        if retry_secs is None:
            retry_secs = env_number("XCORE_STORE_RETRY_SECS", 60)
        super().__init__(PostgresDialect(url, retry_secs), migrate=migrate)  # connects (retrying while it starts)

    @property
    def retries(self) -> int:
        return self.dialect.retries

    @property
    def _conn(self) -> psycopg.Connection[Any] | None:
        return self.dialect.conn


def _password_of(url: str) -> str | None:
    import psycopg

    try:
        return psycopg.conninfo.conninfo_to_dict(url).get("password") or None  # type: ignore[return-value]
    except psycopg.Error:
        return None


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, StoreUnavailableError):
        return True
    import psycopg

    if not isinstance(exc, psycopg.Error):
        return False
    if exc.sqlstate in _RETRY_SQLSTATES:
        return True
    # libpq reports a lost or refused connection without an SQLSTATE; only those heal by waiting
    # (a wrong password, a missing database or a TLS mismatch do not).
    text = str(exc).lower()
    return exc.sqlstate is None and isinstance(exc, psycopg.OperationalError) and any(
        sign in text for sign in _TRANSIENT)


def open_url(url: str, *, migrate: bool = False) -> PostgresStore:
    """The store a ``postgresql://`` URL names; ``migrate``: migrate an older schema (a shared
    server only when asked, ``xcore store migrate``). psycopg is looked for, not imported: reads
    may not need it."""
    import importlib.util

    if importlib.util.find_spec("psycopg") is None:
        raise ConfigurationError("XCORE_STORE names a PostgreSQL server but psycopg is not installed. "
                                 "Install it with: pip install 'xcore[postgres]'")
    return PostgresStore(url, migrate=migrate)

