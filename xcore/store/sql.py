"""The metadata store over SQL: ``MetadataStore`` implemented once, over a dialect
(``xcore.store.dialect``) that runs it on SQLite (``xcore.store.sqlite``) or PostgreSQL
(``xcore.store.postgres``).

Every method is one transaction of the dialect's: ``_transaction`` for a write, ``_read`` for a
read. A dialect that retries a write after a lost connection (PostgreSQL) runs it again with
``retrying=True``; the write then first looks for its own earlier commit (the commit may succeed
while its reply is lost), by the natural key of what it writes, so nothing is recorded twice.
Results and links are upserts by ``(job_id, name)``, so a retried write of them adds nothing.
Jobs a poller records are read through ``_rows_by_id``, which a dialect with row locks locks in
id order, so pollers on many machines append each status change once.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from xcore.errors import NotFoundError
from xcore.model.dependencies import DependencyEdge
from xcore.model.status import JobState, Status
from xcore.store import ExperimentHistory, Imported, MetadataStore, StoreInfo, outbox, records, rows, specs
from xcore.store import statements as sql
from xcore.store.base import CancelRequest
from xcore.store.dialect import Cursor, Dialect, Work
from xcore.store.migrations import SCHEMA_VERSION
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

T = TypeVar("T")
P = ParamSpec("P")
_LARGE_LAUNCH = 1000  # mark_launched of this many jobs is a large write (Dialect.large_write)
_EXPERIMENT_COLUMNS = 'title, tags, notes, script_path, script_sha256, git_commit, git_dirty, "user", host, created_at'


def _reads(method: Callable[Concatenate[SqlStore, Cursor, P], T]) -> Callable[Concatenate[SqlStore, P], T]:
    """The method as one read (``SqlStore._read``): its body gets the cursor after ``self``."""
    @functools.wraps(method)
    def read(self: SqlStore, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._read(lambda cur: method(self, cur, *args, **kwargs))

    return read


def _writes(method: Callable[Concatenate[SqlStore, Cursor, bool, float, P], T]
            ) -> Callable[Concatenate[SqlStore, P], T]:
    """The method as one write (``SqlStore._transaction``): its body gets the cursor, whether
    this is a retry (see the module) and the time of the call (the same in every try)."""
    @functools.wraps(method)
    def write(self: SqlStore, *args: P.args, **kwargs: P.kwargs) -> T:
        now = time.time()
        return self._transaction(lambda cur, retrying: method(self, cur, retrying, now, *args, **kwargs))

    return write


class SqlStore(MetadataStore):
    """``MetadataStore`` on an SQL database; ``dialect`` is the database's side of it."""

    def __init__(self, dialect: Dialect, *, migrate: bool) -> None:
        self.dialect = dialect
        self._known_specs = specs.KnownSpecs()  # spec ids committed through this store object
        self.migrated_from: int | None = dialect.migrate(migrate)  # the version found, when this open migrated it

    # -- plumbing ------------------------------------------------------------------------

    def _transaction(self, work: Work[T]) -> T:
        """``work(cursor, retrying)`` as one write transaction (see ``Dialect.run``)."""
        return self.dialect.run(work, write=True, specs=self._known_specs)

    def _read(self, work: Callable[[Cursor], T]) -> T:
        return self.dialect.run(lambda cur, _: work(cur), write=False, specs=self._known_specs)

    def transaction(self) -> Any:
        """The writes inside are one transaction where the dialect can group them (SQLite): a
        work unit and its tracker links cost one commit, not two, and are recorded together."""
        return self.dialect.group(self._known_specs)

    def close(self) -> None:
        self.dialect.close()

    def _spec_ids(self, cur: Cursor) -> specs.SpecIds:
        """Spec ids for the running transaction (see xcore.store.specs). A spec another launcher
        is recording at the same moment (PostgreSQL): the insert waits for its transaction, then
        skips, and the select (a new snapshot) sees its row."""
        insert, select = specs.insert_sql("?"), specs.select_sql("?")

        def store_one(digest: str, body: str) -> int:
            cur.execute(insert, (digest, body))
            return int(cur.execute(select, (digest,)).fetchone()["id"])

        return self._known_specs.begin(store_one)

    def _unit_filter(self, column: str, experiment_id: int,
                     work_unit_ids: Sequence[int] | None) -> tuple[str, list[Any]]:
        """`` AND <column> is one of the units`` (empty for all) and the parameters after the experiment's id."""
        if work_unit_ids is None:
            return "", [experiment_id]
        clause, params = self.dialect.one_of(column, work_unit_ids)
        return f" AND {clause}", [experiment_id, *params]

    @staticmethod
    def _store_id(cur: Cursor) -> str:
        return str(cur.execute("SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()["value"])

    def _insert_once(self, cur: Cursor, retrying: bool, mine: str, key: Sequence[Any], insert: str,
                     values: Sequence[Any]) -> int:
        """The id of the row ``insert`` adds, or on a retry of the row ``mine`` finds by ``key``
        (the same values, the same instant): our earlier try committed it."""
        row = cur.execute(mine, key).fetchone() if retrying else None
        return int(row["id"]) if row is not None else self.dialect.insert_id(cur, insert, values)

    @staticmethod
    def _unit_is_mine(cur: Cursor, experiment_id: int, work_unit_id: int, now: float) -> bool:
        """On a retry: did our earlier try commit this unit (its id comes from our launcher)?"""
        row = cur.execute("SELECT created_at FROM work_units WHERE experiment_id = ? AND id = ?",
                          (experiment_id, work_unit_id)).fetchone()
        return bool(row and row["created_at"] == now)

    # -- experiments ---------------------------------------------------------------------

    def create_experiment(self, title: str, *, tags: Sequence[str] = (), notes: str = "",
                          script_path: str | None = None, script_sha256: str | None = None,
                          git_commit: str | None = None, git_dirty: bool | None = None, user: str = "",
                          host: str = "") -> ExperimentRecord:
        """Ids are the highest plus one, allocated under the dialect's lock: no gaps."""
        values = (title, json.dumps(list(tags)), notes, script_path, script_sha256, git_commit, git_dirty, user, host)
        return self.get_experiment(self._create_experiment(values))

    @_writes
    def _create_experiment(self, cur: Cursor, retrying: bool, now: float, values: tuple[Any, ...]) -> int:
        """``values``: the columns of ``_EXPERIMENT_COLUMNS`` but the last, ``created_at`` (``now``)."""
        self.dialect.lock_experiments(cur)
        return self._insert_once(  # a retry finds ours by title, user and host at the same instant
            cur, retrying, 'SELECT id FROM experiments WHERE title = ? AND "user" = ? AND host = ? AND created_at = ?',
            (values[0], *values[-2:], now),
            f"INSERT INTO experiments (id, {_EXPERIMENT_COLUMNS}) SELECT COALESCE(MAX(id), 0) + 1,"
            " ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM experiments", (*values, now))

    @_writes
    def update_experiment(self, cur: Cursor, retrying: bool, now: float, experiment_id: int, **changes: Any) -> None:
        unknown = set(changes) - {"title", "tags", "notes", "launch_status", "launch_error"}
        if unknown:
            raise ValueError(f"Cannot update experiment fields {sorted(unknown)}.")
        if "tags" in changes:
            changes = {**changes, "tags": json.dumps(list(changes["tags"]))}
        if changes and cur.execute(f"UPDATE experiments SET {', '.join(f'{name} = ?' for name in changes)}"
                                   " WHERE id = ?", (*changes.values(), experiment_id)).rowcount == 0:
            raise NotFoundError(f"No experiment {experiment_id} in {self.dialect.where}.")

    @_reads
    def get_experiment(self, cur: Cursor, experiment_id: int) -> ExperimentRecord:
        row = cur.execute("SELECT * FROM experiments WHERE id = ?", (experiment_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"No experiment {experiment_id} in the store {self.dialect.where}. "
                                "`xcore list` shows what exists.")
        return self._experiment(row, self._status_counts(cur, [experiment_id]).get(experiment_id, {}))

    @_reads
    def list_experiments(self, cur: Cursor, *, status: str | None = None, title: str | None = None,
                         tag: str | None = None, limit: int | None = 20, user: str | None = None,
                         ) -> list[ExperimentRecord]:
        where, params = ["id < ?"], []
        for clause, value in (('"user" = ?', user), (f"{self.dialect.find}(lower(title), lower(?)) > 0", title or None),
                              (self.dialect.has_tag, tag or None)):
            if value is not None:
                where.append(clause)
                params.append(value)
        query = f"SELECT * FROM experiments WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?"
        # Status is derived, so filter after computing it, a page at a time (without a status
        # filter the first page is the answer: count no more than that).
        size = 500 if status or limit is None else max(limit, 1)
        found: list[ExperimentRecord] = []
        below = 2**62
        while True:
            page = cur.execute(query, (below, *params, size)).fetchall()
            counts = self._status_counts(cur, [r["id"] for r in page])
            for row in page:
                record = self._experiment(row, counts.get(row["id"], {}))
                if status and record.status.value != status.upper():
                    continue
                found.append(record)
                if limit is not None and len(found) >= limit:
                    return found
            if len(page) < size:
                return found
            below = page[-1]["id"]

    def _status_counts(self, cur: Cursor, experiment_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        counts: dict[int, dict[str, int]] = {}
        plain = self.dialect.plain(cur)
        for clause, params in self.dialect.in_chunks("experiment_id", experiment_ids):
            for experiment, status, n in plain.execute(
                f"SELECT experiment_id, status, COUNT(*) FROM work_units WHERE role = 'work_unit' AND {clause}"
                " GROUP BY experiment_id, status", params):
                counts.setdefault(experiment, {})[status] = n
        return counts

    @staticmethod
    def _experiment(row: Any, counts: dict[str, int]) -> ExperimentRecord:
        try:
            return rows.experiment_record(row, counts)
        except Exception as exc:  # noqa: BLE001 - one bad row must not hide the others
            title = row["title"] if isinstance(row["title"], str) else ""
            return ExperimentRecord(id=row["id"], title=title, created_at=_number(row["created_at"]),
                                    status_counts=counts, unreadable=records.unreadable(exc))

    # -- work units and jobs -------------------------------------------------------------

    @_writes
    def add_work_unit(self, cur: Cursor, retrying: bool, now: float, experiment_id: int, work_unit_id: int,
                      role: str, args: Any, identity: str, jobs: Sequence[NewJob], *, lease_id: int | None = None,
                      ) -> list[int]:
        if retrying and self._unit_is_mine(cur, experiment_id, work_unit_id, now):
            return [r["id"] for r in cur.execute("SELECT id FROM jobs WHERE experiment_id = ? AND work_unit_id = ?"
                                                 " ORDER BY id", (experiment_id, work_unit_id))]
        cur.execute(sql.INSERT_UNIT, (experiment_id, work_unit_id, role, json.dumps(args), identity, now))
        spec = self._spec_ids(cur).of
        return [self.dialect.insert_job(cur, (experiment_id, work_unit_id, job.name, job.executor_kind,
                                              spec(job.executor), spec(job.executable), json.dumps(job.args),
                                              json.dumps(job.env), now, lease_id), now) for job in jobs]

    def add_jobs(self, experiment_id: int, work_unit_id: int, jobs: Sequence[NewJob], *,
                 lease_id: int | None = None, replace_unlaunched: bool = False) -> list[int]:
        """One write of ``record_adds`` (role None: more jobs of a recorded unit)."""
        return self.record_adds([UnitWrite(experiment_id, work_unit_id, None, None, "", list(jobs),
                                           replace_unlaunched=replace_unlaunched)], lease_id=lease_id)[0]

    def record_adds(self, writes: Sequence[UnitWrite], *, lease_id: int | None = None) -> list[list[int]]:
        """Many adds in one transaction, a few statements each. Job ids are drawn up front from
        the dialect (SQLite's AUTOINCREMENT counter under the write lock, PostgreSQL's
        sequence), so the rows go in by the dialect's bulk insert; each distinct executor and
        executable is encoded to JSON and looked up in ``job_specs`` once per group. A retry
        first looks for its own commit (the ids it drew, or the first unit's row)."""
        return self._record_adds(writes, lease_id, []) if writes else []

    @_writes
    def _record_adds(self, cur: Cursor, retrying: bool, now: float, writes: Sequence[UnitWrite],
                     lease_id: int | None, drawn: list[int]) -> list[list[int]]:
        if retrying and drawn:  # did the first try commit? Its job ids are there
            if len(self._rows_by_id(cur, drawn, "id")) == len(drawn):
                return _split(writes, drawn)
        elif retrying and writes[0].role is not None:  # (no job drawn) its first unit is there
            if self._unit_is_mine(cur, writes[0].experiment_id, writes[0].work_unit_id, now):
                return _split(writes, [])
        for w in writes:
            if w.replace_unlaunched:
                self._drop_unlaunched(cur, w.experiment_id, w.work_unit_id)
        count = sum(len(w.jobs) for w in writes)
        drawn[:] = ids = self.dialect.draw_job_ids(cur, count) if count else []
        new = rows.add_rows(writes, ids, self._spec_ids(cur).of, now, lease_id)
        self.dialect.insert_rows(cur, sql.INSERT_UNIT, new.units)
        self.dialect.insert_rows(cur, sql.INSERT_JOBS, new.jobs)
        # The group's first events are one statement, not one per job (in SQLite each statement
        # lets go of the GIL and waits to get it back while the script adds on the main thread).
        if ids and ids[-1] - ids[0] == len(ids) - 1:  # drawn in one run (always, in SQLite)
            cur.execute(sql.ADDED_EVENTS.format("id BETWEEN ? AND ?"), (now, ids[0], ids[-1]))
        else:
            for clause, params in self.dialect.in_chunks("id", ids):
                cur.execute(sql.ADDED_EVENTS.format(clause), (now, *params))
        if new.more:
            cur.executemany(sql.UNIT_LAUNCHING, new.more)
        if new.links:
            cur.executemany(sql.UPSERT_LINK, new.links)
        edges = [(e.experiment_id, e.work_unit_id, e.on_experiment_id, e.on_work_unit_id, e.on_job, e.when)
                 for w in writes for e in w.depends_on]
        if edges:
            cur.executemany(_INSERT_EDGE, edges)
        return new.ids

    def _drop_unlaunched(self, cur: Cursor, experiment_id: int, work_unit_id: int) -> None:
        """An identity relaunch: forget the unit's jobs that ended without reaching a backend."""
        old = [r["id"] for r in cur.execute(
            "SELECT id FROM jobs WHERE experiment_id = ? AND work_unit_id = ? AND handle IS NULL"
            f" AND status IN ('FAILED', 'CANCELLED') ORDER BY id{self.dialect.for_update}",
            (experiment_id, work_unit_id)).fetchall()]
        for clause, params in self.dialect.in_chunks("job_id", old):
            cur.execute(f"DELETE FROM job_events WHERE {clause}", params)
        for clause, params in self.dialect.in_chunks("id", old):
            cur.execute(f"DELETE FROM jobs WHERE {clause}", params)

    def mark_launched(self, launched: Sequence[tuple[int, str, dict[str, Any], str | None]], *,
                      intent_id: int | None = None) -> None:
        if launched or intent_id is not None:
            with self.dialect.large_write(len(launched) >= _LARGE_LAUNCH):
                self._settle(launched, [], intent_id)

    def record_states(self, states: Sequence[tuple[int, JobState]], *, intent_id: int | None = None) -> list[int]:
        return self._settle([], states, intent_id) if states or intent_id is not None else []

    @_writes
    def _settle(self, cur: Cursor, retrying: bool, now: float,
                launched: Sequence[tuple[int, str, dict[str, Any], str | None]],
                states: Sequence[tuple[int, JobState]], intent_id: int | None) -> list[int]:
        """What a backend answered: handles of jobs launched, states of jobs; the intent closed.
        Returns the jobs whose state was refused as an earlier attempt's."""
        self._mark_launched(cur, launched, now)
        refused = self._record_states(cur, states, now)
        if intent_id is not None:
            cur.execute(sql.CLOSE_INTENT, (intent_id,))
        return refused

    def _mark_launched(self, cur: Cursor, launched: Sequence[tuple[int, str, dict[str, Any], str | None]],
                       now: float) -> None:
        """Set-based but for the handles (issue 14: a sweep's 10,000 jobs are one launch): the
        history and the units' statuses are one statement per ``IN`` list of launched ids, in id
        order, and nothing is read into Python first (a dialect with row locks locks the rows)."""
        if not launched:
            return
        ids = sorted({job_id for job_id, *_ in launched})
        if self.dialect.for_update:
            self._rows_by_id(cur, ids, "id")
        chunks = self.dialect.in_chunks("id", ids)
        # Before the update: only a job still LAUNCHING gets the PENDING event (marking twice appends nothing).
        for clause, params in chunks:
            cur.execute(sql.LAUNCHED_EVENTS.format(clause), (now, *params))
        cur.executemany(
            sql.MARK_LAUNCHED,
            # Encoded as the update goes: 10,000 handles' JSON is never held at once (3 MB at peak).
            ((kind, rows.dumps(handle), log, now, job_id) for job_id, kind, handle, log in launched),
        )
        for clause, params in chunks:
            cur.execute(sql.LAUNCHED_UNITS.format(clause), params)

    def _record_states(self, cur: Cursor, states: Sequence[tuple[int, JobState]], now: float) -> list[int]:
        """Record ``states``; returns the jobs whose state was read from an earlier attempt (not recorded)."""
        if not states:
            return []
        found = self._rows_by_id(cur, [job_id for job_id, _ in states], "id, status, started_at, ended_at, attempt")
        refused: list[int] = []
        if any(state.attempt is not None for _, state in states):
            refused = [job_id for job_id, state in states if _earlier_attempt(found.get(job_id), state)]
            if refused:
                dropped = set(refused)
                states = [(job_id, state) for job_id, state in states if job_id not in dropped]
        if any(state.attempt is not None or state.previous_attempts for _, state in states):
            found = self._record_attempts(cur, found, states, now)
        updates, events = rows.state_changes(found, states, now, self.dialect.where)
        cur.executemany(sql.RECORD_STATE, updates)
        cur.executemany(sql.INSERT_EVENT, events)
        self._refresh_units(cur, [job_id for job_id, _ in states])
        return refused

    def _record_attempts(self, cur: Cursor, found: dict[int, Any], states: Sequence[tuple[int, JobState]],
                         now: float) -> dict[int, Any]:
        """Merge the attempts the backend reports: earlier attempts are added if new (never
        overwritten); a state on a higher attempt than the row's archives the row's attempt
        and moves the row on, so the new attempt's status is recorded even after a failure."""
        found = dict(found)
        for job_id, state in states:
            row = found.get(job_id)
            if row is None:
                continue
            current = row["attempt"]
            for earlier in state.previous_attempts:
                if earlier.number < max(current, state.attempt or 0) or (
                        earlier.number == current and state.attempt is not None and state.attempt > current):
                    cur.execute(sql.ARCHIVE_ATTEMPT, (job_id, earlier.number, earlier.status.value, earlier.failure,
                                                      earlier.exit_code, earlier.started_at, earlier.ended_at,
                                                      earlier.message, None, None, None))
            if state.attempt is None or state.attempt <= current:
                continue
            old = cur.execute("SELECT status, message, exit_code, failure, started_at, ended_at, handle_kind, handle,"
                              " log_path FROM jobs WHERE id = ?", (job_id,)).fetchone()
            status = old["status"] if Status(old["status"]).is_terminal else Status.FAILED.value
            cur.execute(sql.ARCHIVE_ATTEMPT, (job_id, current, status, old["failure"], old["exit_code"],
                                              old["started_at"], old["ended_at"] or now, old["message"],
                                              old["handle_kind"], old["handle"], old["log_path"]))
            cur.execute(sql.NEXT_ATTEMPT, (state.attempt, job_id))
            cur.execute(sql.INSERT_EVENT, (job_id, state.status.value, f"attempt {state.attempt}", None, now))
            found[job_id] = {"id": job_id, "status": Status.LAUNCHING.value, "started_at": None, "ended_at": None,
                             "attempt": state.attempt}
        return found

    @_writes
    def begin_attempts(self, cur: Cursor, retrying: bool, now: float, claims: Sequence[tuple[int, int, str]],
                       lease_id: int | None, message: str) -> list[int]:
        claimed = []
        for job_id, attempt, status in claims:
            row = cur.execute("SELECT status, message, exit_code, failure, started_at, ended_at, handle_kind, handle,"
                              f" log_path, attempt, lease_id FROM jobs WHERE id = ?{self.dialect.for_update}",
                              (job_id,)).fetchone()
            if row is None:
                continue
            if row["attempt"] != attempt or row["status"] != status:
                if retrying and row["attempt"] == attempt + 1 and row["lease_id"] == lease_id \
                        and row["status"] == Status.LAUNCHING.value:
                    claimed.append(job_id)  # our first try committed it
                continue
            archived = status if Status(status).is_terminal else Status.FAILED.value  # a retry pending: it failed
            cur.execute(sql.ARCHIVE_ATTEMPT, (job_id, attempt, archived, row["failure"], row["exit_code"],
                                              row["started_at"], row["ended_at"] or now, row["message"],
                                              row["handle_kind"], row["handle"], row["log_path"]))
            if cur.execute(sql.RELAUNCH, (attempt + 1, message, lease_id, job_id, attempt)).rowcount == 1:
                cur.execute(sql.INSERT_EVENT, (job_id, Status.LAUNCHING.value, message, None, now))
                claimed.append(job_id)
        if claimed:
            self._refresh_units(cur, claimed)
        return claimed

    @_reads
    def job_attempts(self, cur: Cursor, experiment_id: int,
                     work_unit_ids: Sequence[int] | None = None) -> dict[int, records.JobAttempts]:
        where, params = self._unit_filter("work_unit_id", experiment_id, work_unit_ids)
        found = {r["id"]: records.JobAttempts(r["id"], r["attempt"], r["failure"]) for r in cur.execute(
            "SELECT id, attempt, failure FROM jobs WHERE experiment_id = ?"
            f"{where} AND (attempt > 1 OR failure IS NOT NULL) ORDER BY id", params).fetchall()}
        if found:
            columns = ", ".join(f"a.{c}" for c in rows.ATTEMPT_COLUMNS)
            for r in cur.execute(f"SELECT {columns} FROM job_attempts a JOIN jobs ON jobs.id = a.job_id"
                                 f" WHERE jobs.experiment_id = ?{where.replace('work_unit_id', 'jobs.work_unit_id')}"
                                 " ORDER BY a.job_id, a.number", params).fetchall():
                if r["job_id"] in found:
                    found[r["job_id"]].earlier.append(rows.attempt_record(r))
        return found

    @_reads
    def retry_policies(self, cur: Cursor, job_ids: Sequence[int]) -> dict[int, tuple[int, Any]]:
        found: dict[int, tuple[int, Any]] = {}
        for clause, params in self.dialect.in_chunks("jobs.id", sorted(set(job_ids))):
            for r in cur.execute(f"SELECT jobs.id, jobs.attempt, s.body FROM jobs JOIN job_specs s"
                                 f" ON s.id = jobs.executor_spec WHERE {clause}", params).fetchall():
                body = _json_or_reason(r["body"])
                found[r["id"]] = (r["attempt"], body.get("retry") if isinstance(body, dict) else None)
        return found

    def _rows_by_id(self, cur: Cursor, job_ids: Sequence[int], columns: str) -> dict[int, Any]:
        """The jobs' rows by id (locked in id order where the dialect locks rows)."""
        wanted = set(job_ids)
        ids = sorted(wanted)
        clauses = self.dialect.in_chunks("id", ids)
        if len(ids) > 500 and not self.dialect.for_update and ids[-1] - ids[0] < 2 * len(ids):
            clauses = [("id BETWEEN ? AND ?", [ids[0], ids[-1]])]  # a launch's ids are dense: one range read
        found: dict[int, Any] = {}
        for clause, params in clauses:
            for row in cur.execute(f"SELECT {columns} FROM jobs WHERE {clause} ORDER BY id{self.dialect.for_update}",
                                   params).fetchall():
                if row["id"] in wanted:
                    found[row["id"]] = row
        return found

    def _refresh_units(self, cur: Cursor, job_ids: Sequence[int]) -> None:
        """Recompute the status of every work unit these jobs belong to, from its jobs."""
        found = self._rows_by_id(cur, job_ids, "id, experiment_id, work_unit_id").values()
        units = {(r["experiment_id"], r["work_unit_id"]) for r in found}
        plain = self.dialect.plain(cur)

        def job_statuses() -> Any:
            for experiment_id in {e for e, _ in units}:  # each experiment's units by one range read
                ids = sorted(u for e, u in units if e == experiment_id)
                query = "SELECT work_unit_id, status FROM jobs WHERE experiment_id = ? AND work_unit_id BETWEEN ? AND ?"
                for unit, status in plain.execute(query, (experiment_id, ids[0], ids[-1])):
                    yield (experiment_id, unit), status

        # Consecutive units of one status are one range update: a launched sweep is one statement.
        runs: list[list[Any]] = []  # [status, experiment, first unit, last unit, status]
        for (e, u), status in sorted(rows.unit_statuses(units, job_statuses()).items()):
            last = runs[-1] if runs else None
            if last is not None and last[0] == status and last[1] == e and last[3] == u - 1:
                last[3] = u
            else:
                runs.append([status, e, u, u, status])
        cur.executemany(sql.UNIT_STATUSES, runs)

    def work_units(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> list[WorkUnitRecord]:
        """``unit_rows`` as records (the same reading, and no slower): jobs of one answer may share
        their decoded values, which are read-only, as their specs always were."""
        units = []
        for unit in self.unit_rows(experiment_id, work_unit_ids):
            jobs = [JobRecord(**{**job, "status": Status(job["status"])}) for job in unit.pop("jobs")]
            units.append(WorkUnitRecord(experiment_id=experiment_id, **unit, jobs=jobs))
        return units

    @_reads
    def unit_rows(self, cur: Cursor, experiment_id: int,
                  work_unit_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        unit_filter, params = self._unit_filter("id", experiment_id, work_unit_ids)
        job_filter, _ = self._unit_filter("work_unit_id", experiment_id, work_unit_ids)
        statuses = {s.value for s in Status}
        decoded = _Memo(_loads)  # a sweep's jobs often share their args or env text: decoded once
        body_cursor = self.dialect.plain(cur)

        def read_body(spec_id: int) -> str:
            found = body_cursor.execute("SELECT body FROM job_specs WHERE id = ?", (spec_id,)).fetchone()
            return found[0] if found else ""  # "": shown as unreadable, as any bad text

        bodies = _Memo(read_body)  # spec id -> its text: read once per distinct spec, not joined per row
        spec_values = _Memo(lambda spec_id: _shared_spec(bodies[spec_id]))  # spec id -> its decoded value
        plain = self.dialect.plain(cur)  # plain tuples: no name lookups per field
        units = {
            row[0]: {"id": row[0], "role": row[1], "args": _json_or_reason(row[2], _loads), "identity": row[3],
                     "created_at": row[4], "jobs": []}
            for row in plain.execute(f"SELECT id, role, args, identity, created_at FROM work_units"
                                     f" WHERE experiment_id = ?{unit_filter} ORDER BY id", params).fetchall()
        }
        # by unit, then id: each unit's jobs in id order, in the jobs_by_unit index's own order
        # (ORDER BY id alone sorted every row, specs' ids and handles included, in a temp B-tree)
        for row in plain.execute(f"SELECT {', '.join(rows.STORED_JOB_COLUMNS)}, attempt FROM jobs"
                                 f" WHERE experiment_id = ?{job_filter} ORDER BY work_unit_id, id", params):
            unit = units.get(row[2])
            if unit is None:
                continue
            (job_id, experiment, work_unit, name, executor_kind, executor, executable, args, env, status, message,
             exit_code, handle_kind, handle, log_path, created_at, launched_at, started_at, ended_at, attempt) = row
            try:
                if status not in statuses:
                    raise ValueError(f"{status!r} is not a valid Status")
                job = {  # JobRecord's fields, in its order
                    "id": job_id, "experiment_id": experiment, "work_unit_id": work_unit, "name": name,
                    "executor_kind": executor_kind, "executor": spec_values[executor],
                    "executable": spec_values[executable], "args": decoded[args], "env": decoded[env],
                    "status": status, "message": message, "exit_code": exit_code, "handle_kind": handle_kind,
                    "handle": _loads(handle) if handle else None, "log_path": log_path, "created_at": created_at,
                    "launched_at": launched_at, "started_at": started_at, "ended_at": ended_at, "attempt": attempt,
                }
            except Exception:  # noqa: BLE001 - the record path says why, for this row only
                fields = dict(zip(rows.COPIED_JOB_COLUMNS, row[:-1], strict=True))
                fields["executor"], fields["executable"] = bodies[executor], bodies[executable]
                record = self._job(fields)
                job = {field: getattr(record, field) for field in rows.COPIED_JOB_COLUMNS}
                job["status"], job["attempt"] = record.status.value, attempt
            unit["jobs"].append(job)
        return list(units.values())

    @_reads
    def unit_summaries(self, cur: Cursor, experiment_id: int) -> list[UnitSummary]:
        messages = self.dialect.messages.format(
            "CASE WHEN j.status <> 'COMPLETED' AND j.message <> '' THEN j.message END")
        statuses = {s.value: s for s in Status}
        return [UnitSummary(row[0], row[1], _json_or_reason(row[2]), statuses.get(row[3], Status.UNKNOWN),
                            _number(row[4]), row[5], row[6], row[7] or "")
                for row in self.dialect.plain(cur).execute(
                    "SELECT w.id, w.role, w.args, w.status, w.created_at, MIN(j.started_at), CASE WHEN COUNT(j.id) > 0"
                    f" AND COUNT(j.ended_at) = COUNT(j.id) THEN MAX(j.ended_at) END, {messages} FROM work_units w"
                    " LEFT JOIN jobs j ON j.experiment_id = w.experiment_id AND j.work_unit_id = w.id"
                    " WHERE w.experiment_id = ? GROUP BY w.experiment_id, w.id ORDER BY w.id", (experiment_id,))]

    @_reads
    def active_jobs(self, cur: Cursor, experiment_ids: Sequence[int]) -> list[JobRecord]:
        experiments, params = self.dialect.one_of("experiment_id", experiment_ids)
        active, more = self.dialect.one_of("status", [s.value for s in Status if s.is_active])
        return [self._job(row) for row in cur.execute(
            f"SELECT {rows.LIGHT_JOB_COLUMNS} FROM jobs WHERE {experiments} AND {active} ORDER BY id", params + more)]

    @_reads
    def active_jobs_among(self, cur: Cursor, experiment_ids: Sequence[int], job_ids: Sequence[int]) -> list[JobRecord]:
        experiments, params = self.dialect.one_of("experiment_id", experiment_ids)
        active, more = self.dialect.one_of("status", [s.value for s in Status if s.is_active])
        found = [self._job(row) for clause, ids in self.dialect.in_chunks("id", sorted(set(job_ids)))
                 for row in cur.execute(f"SELECT {rows.LIGHT_JOB_COLUMNS} FROM jobs WHERE {clause} AND {experiments}"
                                        f" AND {active} ORDER BY id", ids + params + more)]
        return sorted(found, key=lambda job: job.id)

    @_reads
    def active_job_versions(self, cur: Cursor, experiment_ids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        experiments, params = self.dialect.one_of("experiment_id", experiment_ids)
        active, more = self.dialect.one_of("status", [s.value for s in Status if s.is_active])
        return {row[0]: row[1:] for row in self.dialect.plain(cur).execute(
            f"SELECT id, {rows.VERSION_COLUMNS} FROM jobs WHERE {experiments} AND {active} ORDER BY id", params + more)}

    @_reads
    def job_statuses(self, cur: Cursor, experiment_id: int,
                     work_unit_ids: Sequence[int] | None = None) -> list[tuple[int, str, int | None, str | None]]:
        unit_filter, params = self._unit_filter("u.id", experiment_id, work_unit_ids)
        return list(self.dialect.plain(cur).execute(
            "SELECT u.id, u.role, j.id, j.status FROM work_units u LEFT JOIN jobs j"
            " ON j.experiment_id = u.experiment_id AND j.work_unit_id = u.id"
            f" WHERE u.experiment_id = ?{unit_filter} ORDER BY u.id, j.id", params).fetchall())

    @_reads
    def job_history(self, cur: Cursor, job_id: int) -> list[StatusEvent]:
        return [rows.status_event(r) for r in cur.execute(
            f"SELECT * FROM job_events WHERE job_id = ? ORDER BY {self.dialect.event_order}", (job_id,)).fetchall()]

    @staticmethod
    def _job(row: Any) -> JobRecord:
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

    @_writes
    def open_lease(self, cur: Cursor, retrying: bool, now: float, experiment_id: int, host: str, pid: int,
                   proc_start: float | None) -> int:
        return self._insert_once(  # a retry finds our lease by the same process at the same instant
            cur, retrying,
            "SELECT id FROM launch_leases WHERE experiment_id = ? AND host = ? AND pid = ? AND heartbeat = ?",
            (experiment_id, host, pid, now),
            "INSERT INTO launch_leases (experiment_id, host, pid, proc_start, heartbeat) VALUES (?, ?, ?, ?, ?)",
            (experiment_id, host, pid, proc_start, now))

    @_writes
    def heartbeat(self, cur: Cursor, retrying: bool, now: float, lease_id: int) -> None:
        cur.execute("UPDATE launch_leases SET heartbeat = ? WHERE id = ?", (now, lease_id))

    @_writes
    def close_lease(self, cur: Cursor, retrying: bool, now: float, lease_id: int) -> None:
        cur.execute("DELETE FROM launch_intents WHERE lease_id = ?", (lease_id,))
        cur.execute("DELETE FROM launch_leases WHERE id = ?", (lease_id,))

    @_writes
    def begin_intent(self, cur: Cursor, retrying: bool, now: float, lease_id: int, executor_kind: str,
                     job_ids: Sequence[int]) -> int:
        ids = json.dumps(list(job_ids))
        return self._insert_once(
            cur, retrying, "SELECT id FROM launch_intents WHERE lease_id = ? AND created_at = ? AND job_ids = ?",
            (lease_id, now, ids),
            "INSERT INTO launch_intents (lease_id, executor_kind, job_ids, created_at) VALUES (?, ?, ?, ?)",
            (lease_id, executor_kind, ids, now))

    @_reads
    def leases(self, cur: Cursor) -> list[LeaseRecord]:
        return [LeaseRecord(*row) for row in self.dialect.plain(cur).execute(
            "SELECT id, experiment_id, host, pid, proc_start, heartbeat, state FROM launch_leases ORDER BY id")]

    @_writes
    def claim_lease(self, cur: Cursor, retrying: bool, now: float, lease: LeaseRecord, host: str, pid: int,
                    proc_start: float | None) -> bool:
        """A conditional UPDATE: of two claimers, the second waits for the first's lock, then
        finds the row changed and updates nothing."""
        if retrying and cur.execute(  # our claim may have committed before the connection dropped
                "SELECT 1 FROM launch_leases WHERE id = ? AND state = 'resolving' AND host = ? AND pid = ?"
                " AND heartbeat = ?", (lease.id, host, pid, now)).fetchone():
            return True
        return bool(cur.execute(sql.CLAIM_LEASE, (host, pid, proc_start, now, lease.id, lease.pid, lease.host,
                                                  lease.heartbeat)).rowcount == 1)

    @_reads
    def lease_orphans(self, cur: Cursor, lease_id: int) -> tuple[list[tuple[str, list[JobRecord]]], list[JobRecord]]:
        jobs = {row["id"]: self._job(row) for row in cur.execute(
            f"{specs.select_jobs([*rows.JOB_COLUMNS, 'attempt'])} WHERE jobs.lease_id = ?"
            " AND jobs.status = 'LAUNCHING'"
            " AND jobs.handle IS NULL ORDER BY jobs.id", (lease_id,)).fetchall()}
        intents = cur.execute("SELECT * FROM launch_intents WHERE lease_id = ? ORDER BY id", (lease_id,)).fetchall()
        return rows.orphans_by_intent(jobs, intents)

    @_writes
    def resolve_lease(self, cur: Cursor, retrying: bool, now: float, lease_id: int,
                      launched: Sequence[tuple[int, str, dict[str, Any], str | None]],
                      failed: Sequence[tuple[int, JobState]], launch_error: str) -> None:
        self._mark_launched(cur, launched, now)
        self._record_states(cur, failed, now)
        row = cur.execute("SELECT experiment_id FROM launch_leases WHERE id = ?", (lease_id,)).fetchone()
        if row is not None and launch_error:
            cur.execute(sql.LAUNCH_FAILED, (launch_error, row["experiment_id"]))
        cur.execute("DELETE FROM launch_intents WHERE lease_id = ?", (lease_id,))
        cur.execute("DELETE FROM launch_leases WHERE id = ?", (lease_id,))

    # -- cancel requests -----------------------------------------------------------------
    # Kept in ``store_meta`` as ``cancel:EXPERIMENT:UNIT`` (``*`` for the whole experiment) = the
    # newest lease of the experiment open at the request: a few rows per cancelled experiment,
    # no schema change. Lease ids only grow, so a launcher honours a request if its lease id is
    # at most that value, and a later launch of a reopened experiment is not cancelled by it.

    @_writes
    def request_cancel(self, cur: Cursor, retrying: bool, now: float, experiment_id: int,
                       work_unit_ids: Sequence[int] | None = None) -> None:
        newest = cur.execute("SELECT MAX(id) AS newest FROM launch_leases WHERE experiment_id = ?",
                             (experiment_id,)).fetchone()["newest"] or 0
        targets = ["*"] if work_unit_ids is None else [str(int(unit)) for unit in work_unit_ids]
        for target in targets:
            key = f"cancel:{int(experiment_id)}:{target}"
            row = cur.execute("SELECT value FROM store_meta WHERE key = ?", (key,)).fetchone()
            if row is None:
                cur.execute("INSERT INTO store_meta (key, value) VALUES (?, ?)", (key, str(newest)))
            elif int(row["value"]) < newest:
                cur.execute("UPDATE store_meta SET value = ? WHERE key = ?", (str(newest), key))

    @_reads
    def cancel_requested(self, cur: Cursor, experiment_id: int, lease_id: int | None = None) -> CancelRequest:
        prefix = f"cancel:{int(experiment_id)}:"
        found = [row["key"][len(prefix):] for row in cur.execute(
                 "SELECT key, value FROM store_meta WHERE key LIKE ?", (prefix + "%",)).fetchall()
                 if lease_id is None or int(row["value"]) >= lease_id]
        return CancelRequest("*" in found, frozenset(int(unit) for unit in found if unit != "*"))

    @_writes
    def record_cancels(self, cur: Cursor, retrying: bool, now: float,
                       states: Sequence[tuple[int, JobState]]) -> list[int]:
        """Read and written in one transaction (rows locked where the dialect locks rows): of two
        cancellers, the second finds the jobs CANCELLED already and claims none."""
        if not states:
            return []
        found = self._rows_by_id(cur, [job_id for job_id, _ in states], "id, status, attempt")
        cancelled = Status.CANCELLED.value
        claimed = {job_id for job_id, state in states
                   if state.status is Status.CANCELLED and job_id in found and found[job_id]["status"] != cancelled
                   and not _earlier_attempt(found[job_id], state)}
        self._record_states(cur, states, now)
        return sorted(claimed)

    # -- the notifications outbox (xcore.store.outbox) -------------------------------------

    def add_notifications(self, items: Sequence[outbox.NewNotification]) -> None:
        if items:
            self._add_notifications(items)

    @_writes
    def _add_notifications(self, cur: Cursor, retrying: bool, now: float,
                           items: Sequence[outbox.NewNotification]) -> None:
        cur.executemany(outbox.INSERT, [  # (insert_rows would repeat the ON CONFLICT clause per row)
            (n.event_id, n.sink, n.experiment_id, n.event_type, n.body, now, now) for n in items])

    def take_notifications(self, claimant: str, lease_secs: float, limit: int = 100, *,
                           sinks: Sequence[str] | None = None) -> list[outbox.NotificationRecord]:
        if sinks is not None and not sinks:
            return []
        return self._take_notifications(claimant, lease_secs, limit, sinks)

    @_writes
    def _take_notifications(self, cur: Cursor, retrying: bool, now: float, claimant: str, lease_secs: float,
                            limit: int, sinks: Sequence[str] | None) -> list[outbox.NotificationRecord]:
        """A retry finds what its committed try took by the claimant and the lease's end."""
        until = now + lease_secs
        clause, values = self.dialect.one_of("sink", list(sinks)) if sinks is not None else ("", [])
        for row in cur.execute(outbox.due_sql(clause), (now, now, *values, limit)).fetchall():
            cur.execute(outbox.TAKE, (claimant, until, row["event_id"], row["sink"], now, now))
        return [outbox.record(row) for row in cur.execute(outbox.MINE, (claimant, until)).fetchall()]

    @_writes
    def finish_notification(self, cur: Cursor, retrying: bool, now: float, event_id: str, sink: str,
                            claimant: str, state: str, error: str = "", next_at: float = 0.0) -> None:
        if state not in outbox.STATES:
            raise ValueError(f"finish_notification: state {state!r} is not one of {outbox.STATES}")
        cur.execute(outbox.FINISH, (state, error, next_at or now, now if state == outbox.SENT else None,
                                    event_id, sink, claimant))

    @_reads
    def notifications(self, cur: Cursor, experiment_id: int | None = None, *, states: Sequence[str] = (),
                      limit: int = 1000) -> list[outbox.NotificationRecord]:
        where, params = [], []
        if experiment_id is not None:
            where.append("experiment_id = ?")
            params.append(experiment_id)
        if states:
            clause, values = self.dialect.one_of("state", list(states))
            where.append(clause)
            params.extend(values)
        query = outbox.LIST + (" WHERE " + " AND ".join(where) if where else "")
        rows = cur.execute(f"{query} ORDER BY created_at DESC, event_id, sink LIMIT ?", [*params, limit]).fetchall()
        return [outbox.record(row) for row in rows]

    @_reads
    def notification_trouble(self, cur: Cursor, experiment_id: int) -> dict[str, int]:
        counts = {row["state"]: int(row["n"]) for row in cur.execute(outbox.TROUBLE, (experiment_id,)).fetchall()}
        failed = counts.pop(outbox.FAILED, 0)
        return {"failed": failed, "retrying": sum(counts.values())}

    # -- the store itself ----------------------------------------------------------------

    @_reads
    def info(self, cur: Cursor) -> StoreInfo:
        c = cur.execute("SELECT (SELECT COUNT(*) FROM experiments) AS e, (SELECT COUNT(*) FROM work_units) AS w,"
                        " (SELECT COUNT(*) FROM jobs) AS j, (SELECT COUNT(*) FROM job_events) AS v").fetchone()
        return StoreInfo(self.dialect.url, self.dialect.backend, self.dialect.schema_version(cur), SCHEMA_VERSION,
                         self._store_id(cur), c["e"], c["w"], c["j"], c["v"])

    def export_history(self, experiment_id: int) -> ExperimentHistory:
        return self._export(self.get_experiment(experiment_id), self.work_units(experiment_id),
                            self.job_attempts(experiment_id))

    @_reads
    def _export(self, cur: Cursor, record: ExperimentRecord, units: list[WorkUnitRecord],
                attempts: dict[int, records.JobAttempts]) -> ExperimentHistory:
        def ask(query: str) -> list[Any]:  # the experiment's rows
            return list(cur.execute(query, (record.id,)).fetchall())

        [row] = ask("SELECT origin FROM experiments WHERE id = ?")
        events: dict[int, list[StatusEvent]] = {}  # each job's history, oldest first
        for event in ask("SELECT e.* FROM job_events e JOIN jobs j ON j.id = e.job_id"
                         f" WHERE j.experiment_id = ? ORDER BY e.{self.dialect.event_order}"):
            events.setdefault(event["job_id"], []).append(rows.status_event(event))
        results = [(r["job_id"], r["name"], r["value"], r["at"]) for r in ask(
            "SELECT job_id, name, value, at FROM job_results WHERE experiment_id = ? ORDER BY at, job_id, name")]
        final = {r["id"]: r["results_at"] for r in ask(
            "SELECT id, results_at FROM jobs WHERE experiment_id = ? AND results_at IS NOT NULL")}
        links = [(r["job_id"], r["name"], r["url"]) for r in ask(
            "SELECT job_id, name, url FROM job_links WHERE experiment_id = ? ORDER BY job_id, name")]
        series = [(r["job_id"], r["name"], r["points"], r["at"]) for r in ask(
            "SELECT job_id, name, points, at FROM job_series WHERE experiment_id = ? ORDER BY job_id, name")]
        edges = [_edge(r) for r in ask("SELECT * FROM unit_dependencies WHERE experiment_id = ?"
                                       " ORDER BY work_unit_id, on_experiment_id, on_work_unit_id, on_job")]
        held = [(r["work_unit_id"], r["state"], r["changed_at"]) for r in ask(
            "SELECT work_unit_id, state, changed_at FROM held_units WHERE experiment_id = ? ORDER BY work_unit_id")]
        origins = {}
        for other in sorted({e.on_experiment_id for e in edges} - {record.id}):
            found = cur.execute("SELECT origin FROM experiments WHERE id = ?", (other,)).fetchone()
            if found is not None:
                origins[other] = found["origin"] or f"{self._store_id(cur)}/{other}"
        return ExperimentHistory(record, units, events, row["origin"] or f"{self._store_id(cur)}/{record.id}",
                                 results, final, links, series, edges, held, origins, attempts)

    def _by_origin(self, cur: Cursor, origin: str) -> int | None:
        """The experiment here that ``origin`` (``STORE_ID/EXPERIMENT_ID``) names: one copied from
        there, or the experiment itself when it was first recorded here."""
        home, _, home_id = origin.partition("/")
        row = cur.execute("SELECT id FROM experiments WHERE origin = ? OR (? AND id = ?)",
                          (origin, home == self._store_id(cur), int(home_id) if home_id.isdigit() else -1)).fetchone()
        return None if row is None else int(row["id"])

    @_writes
    def import_history(self, cur: Cursor, retrying: bool, now: float, history: ExperimentHistory) -> Imported:
        source = history.experiment
        jobs = [job for unit in history.units for job in unit.jobs]
        self.dialect.lock_experiments(cur)
        if self._by_origin(cur, history.origin) is not None:
            return Imported(source.id, None)
        row = cur.execute("SELECT EXISTS (SELECT 1 FROM experiments WHERE id = ?) AS taken,"
                          " (SELECT COALESCE(MAX(id), 0) + 1 FROM experiments) AS next", (source.id,)).fetchone()
        experiment_id = row["next"] if row["taken"] else source.id
        cur.execute(sql.INSERT_EXPERIMENT, (
            experiment_id, source.title, json.dumps(source.tags), source.notes, source.script_path,
            source.script_sha256, source.git_commit, source.git_dirty, source.user, source.host, source.created_at,
            source.launch_status, source.launch_error, history.origin))
        clash = False
        if jobs:
            self.dialect.keep_job_ids(cur, max(j.id for j in jobs))  # before any launcher draws one of them
            clash = bool(self._rows_by_id(cur, [j.id for j in jobs], "id"))
        cur.executemany(sql.COPY_UNIT, [(experiment_id, u.id, u.role, json.dumps(u.args), u.identity, u.status.value,
                                         u.created_at) for u in history.units])  # the status its jobs give it
        columns = rows.STORED_JOB_COLUMNS[1:] if clash else rows.STORED_JOB_COLUMNS
        insert = f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({','.join('?' * len(columns))})"
        here: dict[int, tuple[int, int, int]] = {}  # by the source's job id: (job id, experiment, unit) here
        spec = self._spec_ids(cur).of
        for job in jobs:  # in rows.STORED_JOB_COLUMNS' order; a copied job has no launcher lease here
            values = (job.id, experiment_id, job.work_unit_id, job.name, job.executor_kind, spec(job.executor),
                      spec(job.executable), json.dumps(job.args), json.dumps(job.env), job.status.value, job.message,
                      job.exit_code, job.handle_kind, None if job.handle is None else json.dumps(job.handle),
                      job.log_path, job.created_at, job.launched_at, job.started_at, job.ended_at)
            job_id = self.dialect.insert_id(cur, insert, values[1:] if clash else values)
            here[job.id] = (job_id, experiment_id, job.work_unit_id)
            cur.executemany(sql.INSERT_EVENT, [(job_id, e.status.value, e.message, e.exit_code, e.at)
                                               for e in history.events.get(job.id, [])])
        cur.executemany(sql.SET_RESULTS_AT, [(at, here[j][0]) for j, at in history.results_final.items() if j in here])
        cur.executemany(sql.INSERT_RESULT, [(*here[j], name, value, at) for j, name, value, at in history.results
                                            if j in here])
        cur.executemany(sql.UPSERT_LINK, [(*here[j], name, url) for j, name, url in history.links if j in here])
        cur.executemany(
            "INSERT INTO job_series (job_id, experiment_id, work_unit_id, name, points, at) VALUES (?,?,?,?,?,?)",
            [(*here[j], name, points, at) for j, name, points, at in history.series if j in here])
        self._copy_dependencies(cur, history, experiment_id)
        for source_job, attempts in history.attempts.items():
            if source_job not in here:
                continue
            job_id = here[source_job][0]
            cur.execute("UPDATE jobs SET attempt = ?, failure = ? WHERE id = ?",
                        (attempts.current, attempts.failure, job_id))
            cur.executemany(sql.ARCHIVE_ATTEMPT, [
                (job_id, a.number, a.status.value, a.failure, a.exit_code, a.started_at, a.ended_at, a.message,
                 a.handle_kind, None if a.handle is None else json.dumps(a.handle), a.log_path)
                for a in attempts.earlier])
        return Imported(source.id, experiment_id, clash)

    def _copy_dependencies(self, cur: Cursor, history: ExperimentHistory, experiment_id: int) -> None:
        """The copied experiment's edges and held states, each edge's dependency by its id here
        (an experiment not found here by its origin keeps the source's id)."""
        ids = {history.experiment.id: experiment_id}
        for other, origin in history.dependency_origins.items():
            found = self._by_origin(cur, origin)
            ids[other] = other if found is None else found
        cur.executemany(_INSERT_EDGE, [(experiment_id, e.work_unit_id, ids.get(e.on_experiment_id, e.on_experiment_id),
                                        e.on_work_unit_id, e.on_job, e.when) for e in history.dependencies])
        cur.executemany("INSERT INTO held_units (experiment_id, work_unit_id, state, changed_at) VALUES (?, ?, ?, ?)",
                        [(experiment_id, unit, state, at) for unit, state, at in history.held])

    # -- dependencies between work units ---------------------------------------------------

    @_reads
    def dependencies(self, cur: Cursor, experiment_id: int,
                     work_unit_ids: Sequence[int] | None = None) -> list[DependencyEdge]:
        where, params = self._unit_filter("work_unit_id", experiment_id, work_unit_ids)
        return [_edge(r) for r in cur.execute(
            f"SELECT * FROM unit_dependencies WHERE experiment_id = ?{where}"
            " ORDER BY work_unit_id, on_experiment_id, on_work_unit_id, on_job", params).fetchall()]

    @_reads
    def dependents(self, cur: Cursor, on_units: Sequence[tuple[int, int]]) -> list[DependencyEdge]:
        # One read per experiment on each side, not per unit: a sweep that ends is thousands of units.
        wanted = set(on_units)
        waiting: set[tuple[int, int]] = set()
        for on_experiment in sorted({e for e, _ in wanted}):
            waiting.update((r["experiment_id"], r["work_unit_id"]) for r in cur.execute(
                "SELECT experiment_id, work_unit_id, on_work_unit_id FROM unit_dependencies"
                " WHERE on_experiment_id = ?", (on_experiment,)).fetchall()
                if (on_experiment, r["on_work_unit_id"]) in wanted)
        found: list[DependencyEdge] = []
        for experiment_id in sorted({e for e, _ in waiting}):
            found += [edge for edge in map(_edge, cur.execute(
                "SELECT * FROM unit_dependencies WHERE experiment_id = ?"
                " ORDER BY work_unit_id, on_experiment_id, on_work_unit_id, on_job", (experiment_id,)).fetchall())
                if (edge.experiment_id, edge.work_unit_id) in waiting]
        return found

    @_writes
    def hold_units(self, cur: Cursor, retrying: bool, now: float, units: Sequence[tuple[int, int]],
                   states: Sequence[tuple[int, JobState]]) -> None:
        cur.executemany("INSERT INTO held_units (experiment_id, work_unit_id, state, changed_at)"
                        " VALUES (?, ?, 'held', ?) ON CONFLICT (experiment_id, work_unit_id)"
                        " DO UPDATE SET state = 'held', changed_at = excluded.changed_at",
                        [(e, u, now) for e, u in units])
        self._record_states(cur, states, now)

    @_reads
    def held_states(self, cur: Cursor, units: Sequence[tuple[int, int]]) -> dict[tuple[int, int], str]:
        found = {}
        wanted = set(units)
        for experiment_id in sorted({e for e, _ in wanted}):
            ids = sorted(u for e, u in wanted if e == experiment_id)
            for clause, params in self.dialect.in_chunks("work_unit_id", ids):
                query = f"SELECT work_unit_id, state FROM held_units WHERE experiment_id = ? AND {clause}"
                for row in cur.execute(query, (experiment_id, *params)).fetchall():
                    found[(experiment_id, row["work_unit_id"])] = row["state"]
        return found

    @_writes
    def claim_held(self, cur: Cursor, retrying: bool, now: float, experiment_id: int, work_unit_id: int,
                   to: str, lease_id: int | None = None) -> bool:
        if retrying:  # our earlier try may have committed: the row then has our state and time
            row = cur.execute("SELECT state, changed_at FROM held_units WHERE experiment_id = ? AND work_unit_id = ?",
                              (experiment_id, work_unit_id)).fetchone()
            if row is not None and row["state"] == to and row["changed_at"] == now:
                return True
        claimed = cur.execute(
            "UPDATE held_units SET state = ?, changed_at = ? WHERE experiment_id = ? AND work_unit_id = ?"
            " AND state = 'held'", (to, now, experiment_id, work_unit_id)).rowcount == 1
        if claimed and to == "released":
            ids = [r["id"] for r in cur.execute(
                "SELECT id FROM jobs WHERE experiment_id = ? AND work_unit_id = ? AND handle IS NULL"
                f" AND status = 'PENDING' ORDER BY id{self.dialect.for_update}",
                (experiment_id, work_unit_id)).fetchall()]
            for clause, params in self.dialect.in_chunks("id", ids):
                cur.execute(f"UPDATE jobs SET status = 'LAUNCHING', message = '', lease_id = ? WHERE {clause}",
                            (lease_id, *params))
        return claimed

    # -- results and links ---------------------------------------------------------------

    @_writes
    def record_results(self, cur: Cursor, retrying: bool, now: float, job_id: int,
                       results: Mapping[str, float | None], *, final: bool = False) -> None:
        row = cur.execute("SELECT experiment_id, work_unit_id FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"No job {job_id} in {self.dialect.where}.")
        cur.executemany(sql.UPSERT_RESULT, [(job_id, row["experiment_id"], row["work_unit_id"], name, value, now)
                                            for name, value in results.items()])
        if final:
            cur.execute(sql.SET_RESULTS_AT, (now, job_id))

    def results(self, experiment_id: int,
                work_unit_ids: Sequence[int] | None = None) -> dict[int, dict[str, float | None]]:
        return self._named_by_unit("SELECT work_unit_id, name, value FROM job_results", "at, job_id",
                                   experiment_id, work_unit_ids)

    @_reads
    def results_pending(self, cur: Cursor, experiment_id: int) -> list[int]:
        terminal, params = self.dialect.one_of("status", [s.value for s in Status if s.is_terminal])
        return [r["id"] for r in cur.execute(
            "SELECT id FROM jobs WHERE experiment_id = ? AND results_at IS NULL AND handle IS NOT NULL"
            f" AND {terminal} ORDER BY id", [experiment_id, *params]).fetchall()]

    @_writes
    def record_error_line(self, cur: Cursor, retrying: bool, now: float, job_id: int, line: str) -> None:
        from xcore.model.error_lines import with_error

        row = cur.execute("SELECT status, message FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None or row["status"] != Status.FAILED.value or not line:
            return
        message = with_error(row["message"] or "", line)
        if message != row["message"]:  # a retried write finds its own line there
            cur.execute("UPDATE jobs SET message = ? WHERE id = ?", (message, job_id))

    @_writes
    def record_series(self, cur: Cursor, retrying: bool, now: float, job_id: int,
                      series: Mapping[str, Sequence[tuple[float, float | None]]]) -> None:
        if not series:
            return
        row = cur.execute("SELECT experiment_id, work_unit_id FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"No job {job_id} in {self.dialect.where}.")
        cur.execute("DELETE FROM job_series WHERE job_id = ?", (job_id,))  # upsert, in every dialect
        cur.executemany(
            "INSERT INTO job_series (job_id, experiment_id, work_unit_id, name, points, at) VALUES (?,?,?,?,?,?)",
            [(job_id, row["experiment_id"], row["work_unit_id"], name, json.dumps([list(p) for p in points]), now)
             for name, points in series.items()])

    def series(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None
               ) -> dict[int, dict[str, list[tuple[float, float | None]]]]:
        found = self._named_by_unit("SELECT work_unit_id, name, points FROM job_series", "at, job_id, name",
                                    experiment_id, work_unit_ids)
        return {unit: {name: [tuple(p) for p in json.loads(text)] for name, text in named.items()}
                for unit, named in found.items()}

    def record_links(self, links: Sequence[tuple[int, str, str]]) -> None:
        if links:
            self._record_links(links)

    @_writes
    def _record_links(self, cur: Cursor, retrying: bool, now: float, links: Sequence[tuple[int, str, str]]) -> None:
        cur.executemany(sql.LINK_JOB, [(name, url, job_id) for job_id, name, url in links])

    def links(self, experiment_id: int, work_unit_ids: Sequence[int] | None = None) -> dict[int, dict[str, str]]:
        return self._named_by_unit("SELECT work_unit_id, name, url FROM job_links", "job_id, name",
                                   experiment_id, work_unit_ids)

    @_reads
    def _named_by_unit(self, cur: Cursor, select: str, order: str, experiment_id: int,
                       work_unit_ids: Sequence[int] | None) -> dict[int, dict[str, Any]]:
        """``{work unit: {name: value}}`` from ``select``'s (work_unit_id, name, value) rows of one
        experiment (of some of its units), in ``order``: a later row of a name wins."""
        where, params = self._unit_filter("work_unit_id", experiment_id, work_unit_ids)
        found: dict[int, dict[str, Any]] = {}
        for unit, name, value in self.dialect.plain(cur).execute(
                f"{select} WHERE experiment_id = ?{where} ORDER BY {order}", params):  # a result or a link per job
            named = found.get(unit)
            if named is None:
                named = found[unit] = {}
            named[name] = value
        return found


_INSERT_EDGE = ("INSERT INTO unit_dependencies (experiment_id, work_unit_id, on_experiment_id, on_work_unit_id,"
                " on_job, condition) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")


def _earlier_attempt(row: Any, state: JobState) -> bool:
    """Whether ``state`` was read from an attempt before the one the job's row is on: an
    observer that polled the old handle while another relaunched the job. Recording it would
    end the new attempt with the old one's failure (or make it a retry pending again)."""
    return row is not None and state.attempt is not None and state.attempt < row["attempt"]


def _edge(row: Any) -> DependencyEdge:
    return DependencyEdge(row["experiment_id"], row["work_unit_id"], row["on_experiment_id"], row["on_work_unit_id"],
                          row["on_job"], row["condition"])


def _split(writes: Sequence[UnitWrite], ids: list[int]) -> list[list[int]]:
    """``ids`` (drawn for the writes' jobs in order) as each write's job ids."""
    out, at = [], 0
    for w in writes:
        out.append(ids[at : at + len(w.jobs)] if ids else [])
        at += len(w.jobs)
    return out

class _Memo(dict[Any, Any]):
    """A dict that makes a missing key's value once, with ``make``: a hit is a plain dict lookup
    (no Python call per row), so a sweep's shared texts and specs are read and decoded once."""

    def __init__(self, make: Callable[[Any], Any]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self._make(key)
        return value


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
