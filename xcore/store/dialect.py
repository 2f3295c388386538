"""What one SQL database does its own way, under the one SQL store (``xcore.store.sql``).

The store's statements are written once, with ``?`` placeholders, against the tables of
``xcore.store.schema``; a dialect runs them. It owns the connection and says how a transaction
is run (locking, retries, what errors mean), how new ids are had, how many rows one statement
may carry, and the few fragments of SQL that differ. SQLite (``xcore.store.sqlite``) and
PostgreSQL (``xcore.store.postgres``) are the two dialects.

A third database (MySQL, DuckDB, ...) is a subclass of ``Dialect`` (with its DDL in
``xcore.store.schema``), a ``SqlStore`` subclass binding it, an ``xcore_open_store`` hook that
opens its URL, and the public store contract suite passing against it: subclass
``xcore.testing.store_contract.StoreContract`` with an ``xcore_store_url`` fixture that yields
the URL of a fresh empty store. Nothing else in the store changes.
"""

from __future__ import annotations

import abc
import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from xcore.errors import StoreError
from xcore.store import statements
from xcore.store.migrations import SCHEMA_VERSION, check_version
from xcore.store.specs import KnownSpecs

T = TypeVar("T")
Cursor = Any  # a DB-API cursor whose ``execute`` returns itself and takes ``?`` placeholders
Work = Callable[[Cursor, bool], T]


class Dialect(abc.ABC):
    """One database's side of the SQL store. Rows come by column name (``row["id"]``) from the
    cursors ``run`` hands out, and as plain tuples from ``plain(cursor)``."""

    backend: str  # StoreInfo.backend
    where: str  # the store as messages name it (a path, or a URL without its password)
    url: str  # StoreInfo.url
    event_order = "seq"  # the job_events column that orders a job's history
    chunk = sys.maxsize  # the most values one ``IN`` list holds (``in_chunks``)
    for_update = ""  # appended to a SELECT of jobs to lock them until the commit, in id order
    find = "strpos"  # the SQL function finding a substring: f(haystack, needle) > 0 when found
    has_tag = "jsonb_exists(experiments.tags::jsonb, ?)"  # the experiment's JSON tags hold ``?``
    messages = "string_agg({}, '; ' ORDER BY j.id)"  # a unit's job messages joined (unit_summaries)
    migrations: list[str]  # each schema version's DDL, version 1 first (``xcore.store.schema.migrations``)
    set_version: str  # the statement recording schema version ``{}``
    lock_jobs = ""  # a statement keeping other transactions from changing jobs until the commit, if needed

    @abc.abstractmethod
    def run(self, work: Work[T], *, write: bool, specs: KnownSpecs) -> T:
        """``work(cursor, retrying)`` as one transaction (``write``: it writes), committed when it
        returns and rolled back when it raises; ``specs`` learns which it was. A dialect that
        runs ``work`` again after a lost connection passes ``retrying=True``: the work then first
        looks for its own earlier commit, whose reply may have been lost."""

    def group(self, specs: KnownSpecs) -> contextlib.AbstractContextManager[None]:
        """``MetadataStore.transaction``: writes inside join one transaction, where the dialect can."""
        return contextlib.nullcontext()

    def large_write(self, large: bool) -> contextlib.AbstractContextManager[None]:
        """Around a write of many rows (``mark_launched`` of a sweep): what the database does after it."""
        return contextlib.nullcontext()

    def migrate(self, migrate: bool) -> int | None:
        """Create or migrate the tables (``migrate``: an older schema may be migrated), in one
        transaction that keeps every job; return the version migrated from, if this open
        migrated an existing store."""
        found = self.run(lambda cur, _: self.schema_version(cur), write=False, specs=KnownSpecs())
        if not check_version(found, self.where, will_migrate=migrate or found == 0):
            return None
        with self.migrating():
            version = self.run(lambda cur, _: self._migrate(cur), write=True, specs=KnownSpecs())
        return version if 0 < version < SCHEMA_VERSION else None

    def _migrate(self, cur: Cursor) -> int:
        self.lock_schema(cur)
        version = self.schema_version(cur)  # another process may have migrated meanwhile
        if not check_version(version, self.where, will_migrate=True):
            return version
        count = "SELECT COUNT(*) AS n FROM jobs"  # before and after: only the migration changes jobs
        if version and self.lock_jobs:
            cur.execute(self.lock_jobs)
        jobs = cur.execute(count).fetchone()["n"] if version else 0
        for migration in self.migrations[version:]:
            self.execute_script(cur, migration)
        if cur.execute(count).fetchone()["n"] != jobs:
            raise StoreError(f"Migrating the metadata store {self.where} to schema version {SCHEMA_VERSION} "
                             f"would lose jobs; nothing was changed. Please report this.")
        cur.execute(self.set_version.format(SCHEMA_VERSION))
        return version

    def migrating(self) -> contextlib.AbstractContextManager[None]:
        """Around the migration's transaction: what the database needs set for it."""
        return contextlib.nullcontext()

    def lock_schema(self, cursor: Cursor) -> None:  # noqa: B027 - a database-wide write lock needs none
        """Until the commit, no other transaction migrates."""

    def execute_script(self, cursor: Cursor, script: str) -> None:
        """Run the statements of a migration."""
        cursor.execute(script)

    @abc.abstractmethod
    def schema_version(self, cursor: Cursor) -> int:
        """The stored schema's version (0: no tables yet)."""

    @abc.abstractmethod
    def plain(self, cursor: Cursor) -> Cursor:
        """A cursor of the same transaction whose rows are plain tuples (cheaper by the 10,000)."""

    def one_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``: the SQL and its parameters."""
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def in_chunks(self, column: str, values: Sequence[Any]) -> list[tuple[str, list[Any]]]:
        """``one_of`` for ``chunk`` values at a time."""
        return [self.one_of(column, values[at : at + self.chunk]) for at in range(0, len(values), self.chunk)]

    @abc.abstractmethod
    def insert_id(self, cursor: Cursor, sql: str, params: Sequence[Any]) -> int:
        """Run an ``INSERT`` of one row and return its ``id``."""

    def insert_job(self, cursor: Cursor, values: Sequence[Any], now: float) -> int:
        """Record one job (``statements.INSERT_JOB``'s values) and its first event; its id."""
        job_id = self.insert_id(cursor, statements.INSERT_JOB, values)
        cursor.execute(statements.LAUNCHING_EVENT, (job_id, now))
        return job_id

    @abc.abstractmethod
    def draw_job_ids(self, cursor: Cursor, count: int) -> list[int]:
        """``count`` new job ids, ascending, that no other transaction gets."""

    def lock_experiments(self, cursor: Cursor) -> None:  # noqa: B027 - a database-wide write lock needs none
        """Until the commit, no other transaction allocates an experiment id."""

    def keep_job_ids(self, cursor: Cursor, top: int) -> None:  # noqa: B027 - AUTOINCREMENT follows by itself
        """Job ids up to ``top`` are being inserted as they are (a copied experiment's): never draw them."""

    def insert_rows(self, cursor: Cursor, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """``cursor.executemany(sql, rows)``, as the database takes many rows best."""
        if rows:
            cursor.executemany(sql, rows)

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release the connection."""
