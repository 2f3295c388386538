"""The store contract suite: every check a metadata store must pass, whatever the database.

Point it at your store with one fixture and one class::

    # tests/test_store_contract.py
    import pytest
    from xcore.testing.store_contract import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def xcore_store_url(self, tmp_path):
            return f"mydb:///{tmp_path / 'contract.db'}"  # a fresh, empty store for each test

Each check opens the store through ``open`` (by default the way xcore opens ``XCORE_STORE``:
the ``xcore_open_store`` hook, the installed plugins' included), writes through the
``MetadataStore`` interface and reads it back, also from a new connection and, for the
concurrency checks, from several processes at once (set ``shared = False`` for a store that
lives in one process: those checks are then left out of the subclass, not collected). A few checks also read a table the
interface does not show (submission intents) through ``rows``; a store whose tables this suite
cannot read skips those assertions only.

xcore runs the suite against SQLite (a file, and ``:memory:``) and PostgreSQL. A new SQL
database is a dialect (``xcore.store.dialect``) plus this suite passing against it.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time
from collections import Counter
from contextlib import closing
from typing import Any

import pytest

from xcore.errors import NotFoundError
from xcore.model.dependencies import DependencyEdge
from xcore.model.status import Attempt, JobState, Status, combine
from xcore.store import MetadataStore
from xcore.store.base import CancelRequest
from xcore.store.migrations import SCHEMA_VERSION
from xcore.store.outbox import NewNotification
from xcore.store.records import NewJob, UnitWrite


def open_url(url: str, **options: object) -> MetadataStore:
    """The store at ``url``, opened as xcore opens ``XCORE_STORE`` (installed plugins are loaded
    for a URL the built-in stores do not take)."""
    from xcore.hooks.host import PluginHost

    builtin = url.startswith(("sqlite:", "postgresql://", "postgres://"))
    return PluginHost(load_entry_points=not builtin).open_store(url, dict(options))


def new_job(name: str = "main", env: dict[str, str] | None = None) -> NewJob:
    return NewJob(name, "xlocal.Local", {"kind": "xlocal.Local"}, {"kind": "x"}, ["--a=1"], env or {"K": "v"})


def read_rows(url: str, sql: str) -> list[tuple[Any, ...]] | None:
    """Rows of a table the interface does not show, straight from a SQLite or PostgreSQL store
    (None for another URL)."""
    if url.startswith("sqlite:///"):
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
            return db.execute(sql).fetchall()
    if not url.startswith(("postgresql://", "postgres://")):
        return None
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


# Processes the concurrency checks start (module functions: a spawned child imports them).

def _poll_same_states(url: str, job_ids: list[int], rounds: int) -> None:
    store = open_url(url)
    for _ in range(rounds):
        store.record_states([(j, JobState(Status.RUNNING, "running")) for j in job_ids])
    store.record_states([(j, JobState(Status.COMPLETED, "exit code 0", 0)) for j in job_ids])
    store.close()


def _launcher(url: str, units: int, out: multiprocessing.Queue) -> None:
    store = open_url(url)
    exp = store.create_experiment("concurrent")
    job_ids = []
    for unit in range(1, units + 1):
        job_ids += store.add_work_unit(exp.id, unit, "work_unit", {"u": unit}, "", [new_job()])
        store.mark_launched([(job_ids[-1], "k", {"u": unit}, None)])
    out.put((exp.id, job_ids))
    store.close()


def _grouped_launcher(url: str, groups: int, per_group: int, out: multiprocessing.Queue) -> None:
    store = open_url(url)
    exp = store.create_experiment("grouped")
    lease = store.open_lease(exp.id, "h", os.getpid(), None)
    job_ids: list[list[int]] = []
    for g in range(groups):
        writes = [UnitWrite(exp.id, u, "work_unit", {"u": u}, "", [new_job("a"), new_job("b")],
                            [(1, "tracker", f"https://t.invalid/{exp.id}/{u}")])
                  for u in range(1 + g * per_group, 1 + (g + 1) * per_group)]
        job_ids += store.record_adds(writes, lease_id=lease)
    out.put((exp.id, job_ids))
    store.close()


def _claim_all(url: str, barrier: Any, out: Any) -> None:
    store = open_url(url)
    seen = store.leases()  # every claimer read the same expired leases...
    barrier.wait(60)  # ...and claims them at the same instant
    out.put((os.getpid(), [lease.id for lease in seen if store.claim_lease(lease, "claimer", os.getpid(), 1.5)]))
    store.close()

def _claim_held_units(url: str, units: list[tuple[int, int]], barrier: Any, out: Any) -> None:
    store = open_url(url)
    barrier.wait(60)  # every observer claims the same held units at the same instant
    out.put((os.getpid(), [unit for unit in units if store.claim_held(*unit, "released", None)]))
def _take_all(url: str, barrier: Any, out: Any) -> None:
    store = open_url(url)
    barrier.wait(60)  # every taker asks for the same due rows at the same instant
    out.put([(n.event_id, n.sink) for n in store.take_notifications(f"taker-{os.getpid()}", 60.0)])


def _claim_attempts(url: str, job_ids: list[int], barrier: Any, out: Any) -> None:
    store = open_url(url)
    lease = store.open_lease(1, "relauncher", os.getpid(), None)
    barrier.wait(60)  # every relauncher saw attempt 1 pending a retry, and claims at the same instant
    out.put(store.begin_attempts([(job_id, 1, "PENDING") for job_id in job_ids], lease, "relaunching"))
    store.close()


def _across_processes(check: Any) -> Any:
    """Marks a check that opens the store from several processes at once."""
    check.across_processes = True
    return check


class StoreContract:
    """The checks; subclass it and provide an ``xcore_store_url`` fixture (see the module)."""

    shared = True  # several processes can open the store at once (False: those checks are left out)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.shared:  # a store of one process: its subclass has no multi-process checks at all
            for name in dir(cls):
                if getattr(getattr(cls, name, None), "across_processes", False):
                    setattr(cls, name, None)

    @pytest.fixture
    def store_url(self, xcore_store_url: str) -> str:
        return xcore_store_url

    def open(self, url: str) -> MetadataStore:
        return open_url(url)

    def rows(self, url: str, sql: str) -> list[tuple[Any, ...]] | None:
        """Rows of a table the interface does not show; None where this suite cannot read them."""
        return read_rows(url, sql)

    def assert_rows(self, url: str, sql: str, expected: list[tuple[Any, ...]]) -> None:
        found = self.rows(url, sql)
        assert found is None or found == expected

    def test_ids_start_at_one_and_fields_round_trip(self, store_url):
        store = self.open(store_url)
        title = "sweep 'α' \"β\" $HOME `x` \n line2 🙂"
        record = store.create_experiment(title, tags=["a", "b c"], notes="n\tn", script_path="/s p.py",
                                         script_sha256="ab", git_commit="c0ffee", git_dirty=True, user="ü", host="h")
        assert record.id == 1
        [job_id] = store.add_work_unit(1, 1, "work_unit", {"lr": 0.1, "s": "a b$c"}, "ident", [new_job()])
        store.close()
        store = self.open(store_url)  # a new connection sees exactly what was written
        again = store.get_experiment(1)
        assert (again.title, again.tags, again.notes, again.script_path, again.git_dirty, again.user) == (
            title, ["a", "b c"], "n\tn", "/s p.py", True, "ü")
        [unit] = store.work_units(1)
        assert (unit.id, unit.args, unit.identity, [j.id for j in unit.jobs]) == (1, {"lr": 0.1, "s": "a b$c"}, "ident",
                                                                                 [job_id])
        assert unit.jobs[0].env == {"K": "v"} and unit.jobs[0].args == ["--a=1"]
        with pytest.raises(NotFoundError, match="xcore list"):
            store.get_experiment(99)
        with pytest.raises(ValueError):  # a work unit id is recorded once, never twice (the caller's mistake)
            store.add_work_unit(1, 1, "work_unit", {}, "", [new_job()])
        assert len(store.work_units(1)) == 1

    def test_status_history_and_unit_status(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("t")
        [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {"lr": 1}, "", [new_job("a"), new_job("b")])
        store.mark_launched([(a, "k", {"pid": 1}, "/log"), (b, "k", {"pid": 2}, None)])
        store.mark_launched([(a, "k", {"pid": 1}, "/log")])  # marking twice appends nothing
        store.record_states([(a, JobState(Status.RUNNING)), (b, JobState(Status.RUNNING))])
        store.record_states([(a, JobState(Status.RUNNING))])  # the same state again: no new event
        store.record_states([(a, JobState(Status.COMPLETED, "exit code 0", 0)),
                             (b, JobState(Status.FAILED, "exit 3", 3))])
        store.record_states([(a, JobState(Status.RUNNING))])  # a finished job never becomes active again
        [unit] = store.work_units(exp.id)
        assert unit.status is Status.FAILED and unit.exit_codes == [0, 3]
        assert unit.jobs[0].handle == {"pid": 1} and unit.jobs[0].log_path == "/log"
        assert [e.status for e in store.job_history(a)] == [Status.LAUNCHING, Status.PENDING, Status.RUNNING,
                                                             Status.COMPLETED]
        assert store.get_experiment(exp.id).status_counts == {"FAILED": 1}
        assert store.active_jobs([exp.id]) == []
        with pytest.raises(NotFoundError):
            store.record_states([(10_000, JobState(Status.RUNNING))])

    def test_a_job_named_twice_in_one_call_gets_one_event_per_change(self, store_url):
        """Both stores apply one call's states in order, each to what the one before recorded
        (xcore.store.rows.state_changes): the SQLite store compared each with the row as read, so
        the same state twice gave two events, and a finished job could be made active again."""
        store = self.open(store_url)
        exp = store.create_experiment("t")
        [a] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a")])
        store.mark_launched([(a, "k", {"pid": 1}, None)])
        store.record_states([(a, JobState(Status.RUNNING)), (a, JobState(Status.RUNNING))])
        store.record_states([(a, JobState(Status.COMPLETED, "done", 0)), (a, JobState(Status.RUNNING))])
        assert [e.status for e in store.job_history(a)] == [Status.LAUNCHING, Status.PENDING, Status.RUNNING,
                                                             Status.COMPLETED]
        [unit] = store.work_units(exp.id)
        assert unit.status is Status.COMPLETED and unit.jobs[0].ended_at is not None

    @pytest.mark.parametrize("n", [1, 499, 501, 1_203])

    def test_mark_launched_of_many_jobs_stores_each_handle_event_and_unit_status(self, store_url, n):
        """mark_launched of a sweep's jobs at sizes around the stores' 500-id chunks, the ids not
        dense (another experiment's adds interleave), not in order, one named twice, one already
        launched and one unknown: every handle is stored, each job still LAUNCHING gets exactly one
        PENDING event, and each unit's status is what its jobs give (xcore.model.status.combine)."""
        store = self.open(store_url)
        exp, other = store.create_experiment("sweep").id, store.create_experiment("other").id
        ids: list[int] = []  # the sweep's first job per unit
        second: dict[int, int] = {}  # unit -> its second job (never launched), on every 7th unit
        for start in range(1, n + 1, 100):
            units = range(start, min(start + 100, n + 1))
            written = store.record_adds([
                UnitWrite(exp, u, "work_unit", {"u": u}, "",
                          [new_job(f"j{u}")] + ([new_job(f"k{u}")] if u % 7 == 0 else [])) for u in units])
            for u, jobs in zip(units, written, strict=True):
                ids.append(jobs[0])
                if len(jobs) > 1:
                    second[u] = jobs[1]
            store.record_adds([UnitWrite(other, start, "work_unit", {}, "", [new_job()])])
        early = ids[n // 2]  # launched before, then recorded RUNNING: keeps its status, gets no new event
        store.mark_launched([(early, "k", {"old": True}, "/early")])
        store.record_states([(early, JobState(Status.RUNNING))])
        failed = second.get(7)  # a second job that failed: its unit is FAILED whatever the first does
        if failed is not None:
            store.record_states([(failed, JobState(Status.FAILED, "no"))])
        order = ids[1::2] + ids[::2]  # not in id order
        launched = [(j, "xhpc.SlurmHandle", {"task": i, "run_dir": "/r d", "s": "é\n\"$"}, f"/logs/{i}.log")
                    for i, j in enumerate(order)]
        launched.append(launched[0])  # named twice in one call
        launched.append((10**9, "k", {}, None))  # no such job: passed over
        store.mark_launched(launched)

        units = {u.id: u for u in store.work_units(exp)}
        jobs = {j.id: j for u in units.values() for j in u.jobs}
        for i, j in enumerate(order):
            job = jobs[j]
            assert (job.handle_kind, job.handle, job.log_path) == (
                "xhpc.SlurmHandle", {"task": i, "run_dir": "/r d", "s": "é\n\"$"}, f"/logs/{i}.log")
            assert job.status is (Status.RUNNING if j == early else Status.PENDING)
            assert job.launched_at is not None
            expected = [Status.LAUNCHING, Status.PENDING] + ([Status.RUNNING] if j == early else [])
            history = store.job_history(j)
            assert [e.status for e in history] == expected, j
            assert history[1].message == "submitted"
        for u, unit in units.items():
            first = jobs[ids[u - 1]].status
            expected_status = combine([first] + ([jobs[second[u]].status] if u in second else []))
            assert unit.status is expected_status, u
            if u in second and second[u] != failed:
                assert jobs[second[u]].status is Status.LAUNCHING and jobs[second[u]].handle is None
        if failed is not None:
            assert units[7].status is Status.FAILED
        assert all(u.status is Status.LAUNCHING for u in store.work_units(other))  # another experiment's: untouched
        info = store.info()
        assert info.status_events == info.jobs + n + (1 if failed else 0) + 1
        assert store.get_experiment(exp).status_counts == dict(Counter(u.status.value for u in units.values()))

    def test_add_jobs_and_active_jobs(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("t")
        store.add_work_unit(exp.id, 1, "work_unit", {}, "", [])
        ids = store.add_jobs(exp.id, 1, [new_job("x"), new_job("y")])
        ids += store.add_work_unit(exp.id, 2, "auxiliary", {}, "", [new_job("z")])
        store.record_states([(ids[0], JobState(Status.COMPLETED, "", 0))])
        assert sorted(j.id for j in store.active_jobs([exp.id])) == ids[1:]
        assert [u.id for u in store.work_units(exp.id, [2])] == [2]
        assert store.get_experiment(exp.id).status_counts == {"LAUNCHING": 1}  # auxiliary units do not count

    def test_active_job_versions_move_with_every_state_written(self, store_url):
        """What ``xcore watch`` keeps its records by (issue 31): a job's version moves when its
        state is written, by this connection or another; the others' stay; ``active_jobs``
        reads only the ids asked for (``active_jobs_among``); a change marker, where the store has one, moves with
        another connection's write and stays when nothing was written."""
        store = self.open(store_url)
        exp = store.create_experiment("t")
        ids = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("x"), new_job("y"), new_job("z")])
        marker = store.change_marker()
        before = store.active_job_versions([exp.id])
        assert sorted(before) == ids
        assert store.change_marker() == marker  # nothing written between
        other = self.open(store_url)
        other.record_states([(ids[1], JobState(Status.PENDING, "pending: held"))])
        other.record_states([(ids[2], JobState(Status.COMPLETED, "", 0))])
        if marker is not None:
            assert store.change_marker() != marker
        after = store.active_job_versions([exp.id])
        assert sorted(after) == ids[:2] and after[ids[0]] == before[ids[0]] and after[ids[1]] != before[ids[1]]
        [job] = store.active_jobs_among([exp.id], [ids[1], ids[2]])  # the completed one is no longer active
        assert (job.id, job.status, job.message) == (ids[1], Status.PENDING, "pending: held")
        # The handle is the version's HANDLE_IN_VERSION element: a watcher loads a handle again by it.
        from xcore.store.base import HANDLE_IN_VERSION

        other.mark_launched([(ids[0], "k", {"pid": 7}, None)])
        launched = store.active_job_versions([exp.id])
        assert launched[ids[0]][HANDLE_IN_VERSION] != after[ids[0]][HANDLE_IN_VERSION]
        other.record_states([(ids[0], JobState(Status.RUNNING, "running"))])
        assert store.active_job_versions([exp.id])[ids[0]][HANDLE_IN_VERSION] == launched[ids[0]][HANDLE_IN_VERSION]

    def test_job_statuses_match_the_work_units_records(self, store_url):
        """The statuses a wait polls (issue 14): per job of each unit, in work_units' order, a
        unit without jobs once; the store's query answers what the records say."""
        store = self.open(store_url)
        exp = store.create_experiment("t")
        other = store.create_experiment("other")
        store.add_work_unit(other.id, 1, "work_unit", {}, "", [new_job("o")])
        ids = store.add_work_unit(exp.id, 2, "work_unit", {}, "", [new_job("x"), new_job("y")])
        store.add_work_unit(exp.id, 1, "work_unit", {}, "", [])
        ids += store.add_work_unit(exp.id, 3, "auxiliary", {}, "", [new_job("z")])
        store.record_states([(ids[1], JobState(Status.FAILED, "m", 2)), (ids[2], JobState(Status.RUNNING, ""))])
        expected = [(1, "work_unit", None, None), (2, "work_unit", ids[0], "LAUNCHING"),
                    (2, "work_unit", ids[1], "FAILED"),
                    (3, "auxiliary", ids[2], "RUNNING")]
        assert [tuple(row) for row in store.job_statuses(exp.id)] == expected
        assert [tuple(row) for row in MetadataStore.job_statuses(store, exp.id)] == expected  # the default
        assert [tuple(row) for row in store.job_statuses(exp.id, [3, 1])] == [expected[0], expected[3]]
        assert store.job_statuses(exp.id, [9]) == []

    def test_list_filters_and_user(self, store_url):
        store = self.open(store_url)
        for title, tags, user in [("alpha sweep", ["x"], "ann"), ("beta", ["y"], "bob"),
                                  ("ALPHA two", ["x", "y"], "ann")]:
            store.create_experiment(title, tags=tags, user=user)
        assert [r.title for r in store.list_experiments(title="alpha")] == ["ALPHA two", "alpha sweep"]
        assert [r.id for r in store.list_experiments(tag="y")] == [3, 2]
        assert [r.id for r in store.list_experiments(user="ann")] == [3, 1]
        assert [r.id for r in store.list_experiments(user="ann", tag="y")] == [3]
        assert store.list_experiments(user="nobody") == []
        assert len(store.list_experiments(limit=1)) == 1
        assert [r.id for r in store.list_experiments(status="LAUNCHING", limit=None)] == [3, 2, 1]
        info = store.info()
        assert (info.schema_version, info.code_schema_version, info.experiments, info.jobs) == (
            SCHEMA_VERSION, SCHEMA_VERSION, 3, 0)
        assert "@" not in info.url or "<redacted>" in info.url

    @_across_processes
    def test_many_pollers_append_each_change_once(self, store_url):
        """4 processes record the same states of the same 20 jobs at once: one event per change."""
        store = self.open(store_url)
        exp = store.create_experiment("polled")
        ids = [store.add_work_unit(exp.id, u, "work_unit", {}, "", [new_job()])[0] for u in range(1, 21)]
        store.mark_launched([(j, "k", {}, None) for j in ids])
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_poll_same_states, args=(store_url, ids, 5)) for _ in range(4)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(120)
            assert proc.exitcode == 0
        for job_id in ids:
            assert [e.status for e in store.job_history(job_id)] == [
                Status.LAUNCHING, Status.PENDING, Status.RUNNING, Status.COMPLETED]

    @_across_processes
    def test_concurrent_launchers_get_gap_free_ids(self, store_url):
        """6 launcher processes create experiments and add 40 units each at once."""
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=_launcher, args=(store_url, 40, out)) for _ in range(6)]
        for proc in procs:
            proc.start()
        results = [out.get(timeout=180) for _ in procs]
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        store = self.open(store_url)
        assert sorted(exp for exp, _ in results) == [1, 2, 3, 4, 5, 6]
        all_jobs = [j for _, jobs in results for j in jobs]
        assert len(set(all_jobs)) == 240
        for exp, jobs in results:
            units = store.work_units(exp)
            assert [u.id for u in units] == list(range(1, 41))
            assert [j.id for u in units for j in u.jobs] == jobs
            assert all(u.jobs[0].status is Status.PENDING for u in units)
        info = store.info()
        assert (info.experiments, info.work_units, info.jobs, info.status_events) == (6, 240, 240, 480)
        events = Counter((e.job_id, e.status) for j in all_jobs[:40] for e in store.job_history(j))
        assert set(events.values()) == {1}

    @_across_processes
    def test_grouped_adds_from_concurrent_launchers_get_distinct_ids(self, store_url):
        """4 launcher processes commit 5 groups of 10 adds (2 jobs and a link each) at once."""
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=_grouped_launcher, args=(store_url, 5, 10, out)) for _ in range(4)]
        for proc in procs:
            proc.start()
        results = [out.get(timeout=180) for _ in procs]
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        store = self.open(store_url)
        every = [j for _, ids in results for unit in ids for j in unit]
        assert len(every) == len(set(every)) == 400
        for exp, ids in results:
            units = store.work_units(exp)
            assert [u.id for u in units] == list(range(1, 51))
            assert [[j.id for j in u.jobs] for u in units] == ids
            assert all([j.name for j in u.jobs] == ["a", "b"] and u.jobs[0].status is Status.LAUNCHING for u in units)
            assert store.links(exp) == {u: {"tracker": f"https://t.invalid/{exp}/{u}"} for u in range(1, 51)}
        info = store.info()
        assert (info.work_units, info.jobs, info.status_events) == (200, 400, 400)

    def test_grouped_adds_are_all_or_nothing_and_extend_units(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("group")
        [[a], [], [b, c]] = store.record_adds([
            UnitWrite(exp.id, 1, "work_unit", {"lr": 0.1}, "u1", [new_job("a")]),
            UnitWrite(exp.id, 2, "work_unit", {}, "u2", []),  # a job generator's unit: its jobs come later
            UnitWrite(exp.id, 2, None, None, "", [new_job("b"), new_job("c", env={"Z": "1"})], [(1, "w", "https://w.invalid")]),
        ])
        assert a < b < c
        with pytest.raises(ValueError):  # unit 1 again: the whole group is refused, unit 3 too
            store.record_adds([UnitWrite(exp.id, 3, "work_unit", {}, "", [new_job()]),
                               UnitWrite(exp.id, 1, "work_unit", {}, "", [new_job()])])
        units = store.work_units(exp.id)
        assert [(u.id, u.args, u.identity, [j.id for j in u.jobs]) for u in units] == [
            (1, {"lr": 0.1}, "u1", [a]), (2, {}, "u2", [b, c])]
        assert units[1].jobs[1].env == {"Z": "1"} and units[0].jobs[0].env == {"K": "v"}
        assert store.links(exp.id) == {2: {"w": "https://w.invalid"}}
        assert store.info().jobs == 3
        store.record_states([(a, JobState(Status.FAILED, "failed to launch: the launcher stopped"))])
        [[again]] = store.record_adds([UnitWrite(exp.id, 1, None, None, "", [new_job("a")], replace_unlaunched=True)])
        assert [j.id for j in store.work_units(exp.id, [1])[0].jobs] == [again] and again > c


    # -- launcher leases (see xcore.runtime.orphans) -----------------------------------------------------------

    def test_lease_heartbeat_intents_orphans_and_resolution(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("leased")
        lease = store.open_lease(exp.id, "host-a", 4242, 1000.5)
        assert isinstance(lease, int)
        [before] = store.leases()
        assert (before.id, before.experiment_id, before.host, before.pid, before.proc_start, before.state) == (
            lease, exp.id, "host-a", 4242, 1000.5, "open")
        time.sleep(0.01)
        store.heartbeat(lease)
        [after] = store.leases()
        assert after.heartbeat > before.heartbeat and after.state == "open"

        [a] = store.add_work_unit(exp.id, 1, "work_unit", {}, "u1", [new_job("a")], lease_id=lease)  # recorded
        [b1, b2] = store.add_work_unit(exp.id, 2, "work_unit", {}, "u2", [new_job("b1"), new_job("b2")],
                                       lease_id=lease)  # handed to the backend, not recorded (in flight)
        store.add_work_unit(exp.id, 3, "work_unit", {}, "u3", [])
        [c, r] = store.add_jobs(exp.id, 3, [new_job("c"), new_job("r")], lease_id=lease)  # c queued, r refused
        [free] = store.add_work_unit(exp.id, 4, "work_unit", {}, "", [new_job()])  # no lease: never an orphan
        intent_a = store.begin_intent(lease, "xlocal.Local", [a])
        store.mark_launched([(a, "k", {"pid": 1}, "/log/a")], intent_id=intent_a)
        intent_r = store.begin_intent(lease, "xlocal.Local", [r])
        store.record_states([(r, JobState(Status.FAILED, "failed to launch: refused"))], intent_id=intent_r)
        intent_b = store.begin_intent(lease, "xhpc.Slurm", [b1, b2])
        self.assert_rows(store_url, "SELECT id FROM launch_intents", [(intent_b,)])  # closed with their records

        orphans = store.lease_orphans(lease)
        in_flight, queued = orphans
        assert [(kind, [j.id for j in jobs]) for kind, jobs in in_flight] == [("xhpc.Slurm", [b1, b2])]
        assert [j.id for j in queued] == [c] and free not in [j.id for j in queued]
        assert in_flight[0][1][0].env == {"K": "v"}  # whole records: the resolver re-creates the requests

        adopted = [(b1, "k", {"pid": 2}, "/log/b1")]
        failed = [(b2, JobState(Status.FAILED, "failed to launch: never arrived")),
                  (c, JobState(Status.FAILED, "failed to launch: queued"))]
        with pytest.raises(NotFoundError):  # a resolution that fails half-way records nothing of it
            store.resolve_lease(lease, adopted, [*failed, (10_000, JobState(Status.FAILED, "x"))], "stopped")
        assert store.lease_orphans(lease) == orphans and [x.id for x in store.leases()] == [lease]
        assert store.get_experiment(exp.id).launch_status == "LAUNCHING"

        store.resolve_lease(lease, adopted, failed, "the launcher stopped")
        assert store.leases() == []
        self.assert_rows(store_url, "SELECT COUNT(*) FROM launch_intents", [(0,)])
        assert store.lease_orphans(lease) == ([], [])
        jobs = {j.id: j for unit in store.work_units(exp.id) for j in unit.jobs}
        assert (jobs[b1].status, jobs[b1].handle, jobs[b1].log_path) == (Status.PENDING, {"pid": 2}, "/log/b1")
        assert [jobs[j].status for j in (b2, c, free)] == [Status.FAILED, Status.FAILED, Status.LAUNCHING]
        assert jobs[c].message == "failed to launch: queued" and jobs[c].handle is None
        assert [e.status for e in store.job_history(b1)] == [Status.LAUNCHING, Status.PENDING]
        record = store.get_experiment(exp.id)
        assert (record.launch_status, record.launch_error) == ("LAUNCH_FAILED", "the launcher stopped")

    def test_closed_lease_leaves_nothing_behind(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("closed")
        lease = store.open_lease(exp.id, "h", 1, None)
        [job] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job()], lease_id=lease)
        store.begin_intent(lease, "xlocal.Local", [job])
        store.close_lease(lease)
        store.close_lease(lease)  # twice: nothing to do
        assert store.leases() == []
        self.assert_rows(store_url, "SELECT COUNT(*) FROM launch_intents", [(0,)])
        record = store.get_experiment(exp.id)
        assert record.launch_status == "LAUNCHING" and record.launch_error == ""

    def test_cancel_requests_reach_the_launchers_open_at_the_request(self, store_url):
        store, other = self.open(store_url), self.open(store_url)
        first, second = store.create_experiment("a"), store.create_experiment("b")
        store_id = store.info().store_id
        running = store.open_lease(second.id, "h", 1, None)
        assert other.cancel_requested(first.id) == CancelRequest()
        store.request_cancel(second.id, [2, 3])
        store.request_cancel(second.id, [3])  # again: nothing more
        seen = other.cancel_requested(second.id, running)
        assert seen == CancelRequest(False, frozenset({2, 3})) == other.cancel_requested(second.id)
        assert seen.covers(2) and not seen.covers(1)
        assert other.cancel_requested(first.id) == CancelRequest()
        store.request_cancel(first.id)  # no launcher holds it: a launch that starts later is not cancelled
        later = store.open_lease(first.id, "h", 2, None)
        assert other.cancel_requested(first.id, later) == CancelRequest()
        assert other.cancel_requested(first.id).whole  # without a lease: every request
        store.request_cancel(first.id)  # now it holds one
        assert other.cancel_requested(first.id, later).whole and other.cancel_requested(first.id, later).covers(9)
        assert not other.cancel_requested(second.id, running).whole
        store.close_lease(running)
        store.request_cancel(second.id, [3])  # nothing open: the earlier launcher's request stays
        assert other.cancel_requested(second.id, running).covers(3)
        assert other.info().store_id == store_id

    def test_record_cancels_counts_only_the_jobs_it_moved_to_cancelled(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("cancels")
        ids = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a"), new_job("b"), new_job("c")])
        store.mark_launched([(job_id, "k", {"n": job_id}, None) for job_id in ids])
        cancelled = JobState(Status.CANCELLED, "cancelled")
        assert store.record_cancels([(ids[0], cancelled), (ids[2], JobState(Status.COMPLETED, "done"))]) == [ids[0]]
        assert store.record_cancels([(job_id, cancelled) for job_id in ids[:2]]) == [ids[1]]
        assert store.record_cancels([(job_id, cancelled) for job_id in ids[:2]]) == []
        assert [j.status for j in store.work_units(exp.id)[0].jobs] == [Status.CANCELLED] * 2 + [Status.COMPLETED]

    @_across_processes
    def test_each_expired_lease_is_claimed_by_exactly_one_of_many_processes(self, store_url):
        """3 processes that read the same 30 leases claim them at once: each lease is won once."""
        store = self.open(store_url)
        exp = store.create_experiment("dead launchers")
        opened = [store.open_lease(exp.id, "gone-host", 100 + i, 5.0) for i in range(30)]
        stale = store.leases()
        ctx = multiprocessing.get_context("spawn")
        barrier, out = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_claim_all, args=(store_url, barrier, out)) for _ in range(3)]
        for proc in procs:
            proc.start()
        won = [out.get(timeout=120) for _ in procs]
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        print(f"\nleases won per process: {[len(w) for _, w in won]}")
        assert Counter(lease for _, w in won for lease in w) == Counter(opened)  # every lease exactly once
        winner = {lease: pid for pid, w in won for lease in w}
        now = store.leases()
        assert all(x.state == "resolving" and x.host == "claimer" and x.pid == winner[x.id] and x.proc_start == 1.5
                   for x in now)
        assert not any(store.claim_lease(x, "late", 1, None) for x in stale)  # a stale record never claims
        assert store.claim_lease(now[0], "late", 1, None)  # the current one does (its claimer died too)

    def test_dependencies_are_recorded_with_their_units_and_read_both_ways(self, store_url):
        store = self.open(store_url)
        first, second = store.create_experiment("train"), store.create_experiment("eval")
        store.record_adds([UnitWrite(first.id, u, "work_unit", {}, "", [new_job("train"), new_job("ps")])
                           for u in (1, 2)])
        edges = [DependencyEdge(second.id, 1, first.id, 1, "train", "success"),
                 DependencyEdge(second.id, 1, first.id, 2, "", "finished")]
        store.record_adds([UnitWrite(second.id, 1, "work_unit", {}, "", [new_job()], depends_on=edges),
                           UnitWrite(second.id, 2, "work_unit", {}, "", [new_job()],
                                     depends_on=[DependencyEdge(second.id, 2, second.id, 1)])])
        store.close()
        store = self.open(store_url)
        assert store.dependencies(second.id) == [*edges, DependencyEdge(second.id, 2, second.id, 1)]
        assert store.dependencies(second.id, [1]) == edges and store.dependencies(first.id) == []
        assert store.dependents([(first.id, 2)]) == edges  # every edge of each unit that waits on it
        assert store.dependents([(second.id, 1)]) == [DependencyEdge(second.id, 2, second.id, 1)]
        assert store.dependents([(second.id, 2)]) == []

    def test_a_held_unit_is_released_once_and_its_jobs_go_back_under_the_releasers_lease(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("held")
        ids = store.record_adds([UnitWrite(exp.id, u, "work_unit", {}, "", [new_job("a"), new_job("b")])
                                 for u in (1, 2)])
        waiting = JobState(Status.PENDING, "waiting for 1/9")
        store.hold_units([(exp.id, 1), (exp.id, 2)], [(j, waiting) for j in ids[0] + ids[1]])
        assert store.held_states([(exp.id, 1), (exp.id, 2), (exp.id, 3)]) == {(exp.id, 1): "held", (exp.id, 2): "held"}
        assert {(j.status, j.message, j.handle) for u in store.work_units(exp.id) for j in u.jobs} == {
            (Status.PENDING, "waiting for 1/9", None)}
        lease = store.open_lease(exp.id, "observer", os.getpid(), None)
        assert store.claim_held(exp.id, 1, "released", lease)
        assert not store.claim_held(exp.id, 1, "released", lease) and not store.claim_held(exp.id, 1, "cancelled")
        assert store.claim_held(exp.id, 2, "cancelled") and not store.claim_held(exp.id, 2, "released", lease)
        assert store.held_states([(exp.id, 1), (exp.id, 2)]) == {(exp.id, 1): "released", (exp.id, 2): "cancelled"}
        [one, two] = store.work_units(exp.id)
        assert [j.status for j in one.jobs] == [Status.LAUNCHING] * 2  # submitted next, under the lease
        assert [j.status for j in two.jobs] == [Status.PENDING] * 2  # the canceller records why
        _, queued = store.lease_orphans(lease)
        assert sorted(j.id for j in queued) == ids[0]  # a releaser killed now leaves them to the next command
        store.hold_units([(exp.id, 1)], [])  # held again (e.g. a dependency resubmitted): claimable again
        assert store.claim_held(exp.id, 1, "released", lease)

    @_across_processes
    def test_each_held_unit_is_released_by_exactly_one_of_many_observers(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("observers")
        ids = store.record_adds([UnitWrite(exp.id, u, "work_unit", {}, "", [new_job()]) for u in range(1, 21)])
        units = [(exp.id, u) for u in range(1, 21)]
        store.hold_units(units, [(j, JobState(Status.PENDING, "waiting")) for [j] in ids])
        ctx = multiprocessing.get_context("spawn")
        barrier, out = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_claim_held_units, args=(store_url, units, barrier, out)) for _ in range(3)]
        for proc in procs:
            proc.start()
        won = [out.get(timeout=120) for _ in procs]
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        assert Counter(tuple(u) for _, w in won for u in w) == Counter(units)  # every unit exactly once

    def test_identity_relaunch_replaces_only_jobs_that_never_reached_a_backend(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("relaunch")
        first = store.open_lease(exp.id, "h", 1, None)
        [ran, never, stopped, waiting] = store.add_work_unit(
            exp.id, 1, "work_unit", {}, "u1", [new_job(n) for n in ("ran", "never", "stopped", "waiting")],
            lease_id=first)
        [other] = store.add_work_unit(exp.id, 2, "work_unit", {}, "u2", [new_job()], lease_id=first)
        store.mark_launched([(ran, "k", {"pid": 1}, None)])
        store.record_states([(ran, JobState(Status.FAILED, "exit code 1", 1)),
                             (never, JobState(Status.FAILED, "failed to launch: the launcher stopped")),
                             (stopped, JobState(Status.CANCELLED, "interrupted before submission")),
                             (other, JobState(Status.FAILED, "failed to launch: the launcher stopped"))])
        second = store.open_lease(exp.id, "h", 2, None)
        new = store.add_jobs(exp.id, 1, [new_job("never"), new_job("stopped")], lease_id=second,
                             replace_unlaunched=True)
        [unit, unit2] = store.work_units(exp.id)
        assert [j.id for j in unit.jobs] == [ran, waiting, *new]  # ran reached a backend; waiting has not ended
        assert store.job_history(never) == [] and store.job_history(stopped) == []
        assert [j.id for j in unit2.jobs] == [other]  # only the relaunched unit changes
        assert [j.id for j in store.lease_orphans(second)[1]] == new
        assert [j.id for j in store.lease_orphans(first)[1]] == [waiting]
        assert store.get_experiment(exp.id).status_counts == {"LAUNCHING": 1, "FAILED": 1}
        assert min(new) > max(ran, never, stopped, waiting, other)  # ids are never reused

    def test_attempts_are_history_never_overwritten(self, store_url):
        """A state on a higher attempt archives the row's attempt and moves the row on (also
        after a FAILED one); earlier attempts the backend reports are added once, never changed."""
        store = self.open(store_url)
        exp = store.create_experiment("attempts")
        [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a"), new_job("b")])
        store.mark_launched([(a, "k", {"pid": 1}, "/log1"), (b, "k", {"pid": 2}, None)])
        store.record_states([(a, JobState(Status.RUNNING, "running", started_at=10.0)),
                             (b, JobState(Status.FAILED, "exit code 3", 3, failure="error"))])
        store.record_states([(a, JobState(Status.FAILED, "preempted", None, 10.0, 20.0, failure="preempted"))])
        store.record_states([(a, JobState(Status.RUNNING, "running again", started_at=30.0, attempt=2))])
        assert store.work_units(exp.id)[0].jobs[0].status is Status.RUNNING  # attempt 2 runs after attempt 1 failed
        reported = Attempt(1, Status.FAILED, "node_failure", None, 1.0, 2.0, "rewritten")
        store.record_states([(a, JobState(Status.COMPLETED, "exit code 0", 0, 30.0, 45.0, attempt=2,
                                          previous_attempts=(reported,)))])
        found = store.job_attempts(exp.id)
        assert set(found) == {a, b}
        assert (found[b].current, found[b].failure, found[b].earlier) == (1, "error", [])
        [first] = found[a].earlier
        assert (first.number, first.status, first.failure, first.started_at, first.ended_at) == (
            1, Status.FAILED, "preempted", 10.0, 20.0)  # the record kept, not the later report
        assert (first.handle, first.log_path) == ({"pid": 1}, "/log1")
        assert (found[a].current, found[a].count, found[a].last_failure) == (2, 2, "preempted")
        assert found[a].earlier_seconds() == 10.0
        [unit] = store.work_units(exp.id)
        assert unit.jobs[0].status is Status.COMPLETED and unit.jobs[0].started_at == 30.0
        assert "attempt 2" in [e.message for e in store.job_history(a)]
        assert store.retry_policies([a]) == {a: (2, None)}
        assert store.job_attempts(exp.id, [2]) == {}

    def test_a_relaunch_claims_each_attempt_once(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("relaunch")
        lease = store.open_lease(exp.id, "h", 1, None)
        [a] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a")])
        store.mark_launched([(a, "k", {"pid": 1}, "/log1")])
        store.record_states([(a, JobState(Status.FAILED, "exit code 1", 1, 1.0, 2.0, failure="error"))])
        assert store.begin_attempts([(a, 1, "RUNNING")], lease, "retry") == []  # not what the claimer saw
        assert store.begin_attempts([(a, 1, "FAILED")], lease, "retry (attempt 2)") == [a]
        assert store.begin_attempts([(a, 1, "FAILED")], lease, "retry (attempt 2)") == []  # claimed already
        [job] = store.work_units(exp.id)[0].jobs
        assert (job.status, job.handle, job.log_path, job.exit_code, job.message) == (
            Status.LAUNCHING, None, None, None, "retry (attempt 2)")
        assert [j.id for j in store.lease_orphans(lease)[1]] == [a]  # a relauncher that dies now is resolved
        assert store.lease_orphans(lease)[1][0].attempt == 2
        [earlier] = store.job_attempts(exp.id)[a].earlier
        assert (earlier.number, earlier.status, earlier.exit_code, earlier.log_path) == (1, Status.FAILED, 1, "/log1")
        assert store.get_experiment(exp.id).status_counts == {"LAUNCHING": 1}

    def test_a_state_read_from_an_earlier_attempt_is_not_recorded_over_a_later_one(self, store_url):
        """An observer that read attempt 1's state before another relaunched the job as attempt 2
        records it late: it must not end attempt 2 (FAILED) nor make it a retry pending again."""
        store = self.open(store_url)
        exp = store.create_experiment("late observer")
        lease = store.open_lease(exp.id, "h", 1, None)
        [a] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a")])
        store.mark_launched([(a, "k", {"pid": 1}, "/log1")])
        store.record_states([(a, JobState(Status.PENDING, "retry pending", failure="preempted", attempt=1))])
        assert store.begin_attempts([(a, 1, "PENDING")], lease, "retry") == [a]
        store.mark_launched([(a, "k", {"pid": 2}, "/log2")])
        refused = store.record_states([(a, JobState(Status.FAILED, "preempted", failure="preempted", attempt=1)),
                                       (a, JobState(Status.PENDING, "retry pending", failure="preempted", attempt=1))])
        assert refused is None or list(refused) == [a, a]  # the ids refused, for the caller to read again
        [job] = store.work_units(exp.id)[0].jobs
        assert (job.attempt, job.status, job.handle, job.message) == (2, Status.PENDING, {"pid": 2}, "submitted")
        assert store.get_experiment(exp.id).status_counts == {"PENDING": 1}
        assert not store.record_states([(a, JobState(Status.RUNNING, "running", started_at=5.0, attempt=2))])
        assert store.work_units(exp.id)[0].jobs[0].status is Status.RUNNING  # attempt 2's own state is recorded

    @_across_processes
    def test_many_relaunchers_claim_each_attempt_exactly_once(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("racing observers")
        ids = [store.add_work_unit(exp.id, u, "work_unit", {}, "", [new_job()])[0] for u in range(1, 21)]
        store.mark_launched([(j, "k", {"n": j}, None) for j in ids])
        store.record_states([(j, JobState(Status.PENDING, "retry pending", failure="preempted")) for j in ids])
        ctx = multiprocessing.get_context("spawn")
        barrier, out = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_claim_attempts, args=(store_url, ids, barrier, out)) for _ in range(3)]
        for proc in procs:
            proc.start()
        won = [out.get(timeout=120) for _ in procs]
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        assert Counter(j for w in won for j in w) == Counter(ids)  # every job claimed exactly once
        assert {a.current for a in store.job_attempts(exp.id).values()} == {2}

    def test_results_overwrite_by_name_and_the_last_recorded_wins(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("results")
        other = store.create_experiment("other")
        [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a"), new_job("b")])
        [c] = store.add_work_unit(exp.id, 2, "work_unit", {}, "", [new_job("c")])
        [never] = store.add_work_unit(exp.id, 3, "work_unit", {}, "", [new_job("never launched")])
        [elsewhere] = store.add_work_unit(other.id, 1, "work_unit", {}, "", [new_job()])
        store.mark_launched([(j, "k", {"j": j}, None) for j in (a, b, c, elsewhere)])
        assert store.results_pending(exp.id) == []  # nothing terminal yet
        store.record_states([(a, JobState(Status.COMPLETED, "", 0)), (b, JobState(Status.FAILED, "x", 1)),
                             (c, JobState(Status.COMPLETED, "", 0)), (never, JobState(Status.FAILED, "no", None)),
                             (elsewhere, JobState(Status.COMPLETED, "", 0))])
        assert store.results_pending(exp.id) == [a, b, c]  # launched and terminal: their logs need reading
        store.record_results(a, {"loss": 1.0, "accuracy": 0.5})
        store.record_results(a, {"loss": 0.5, "odd": None})  # overwrites loss, keeps accuracy
        store.record_results(b, {"loss": 0.25}, final=True)  # recorded last: wins for the unit
        store.record_results(c, {}, final=True)  # reported nothing, still read for good
        store.record_results(elsewhere, {"loss": 7.0}, final=True)
        assert store.results(exp.id) == {1: {"loss": 0.25, "accuracy": 0.5, "odd": None}}
        assert store.results(exp.id, [2, 3]) == {} and store.results(other.id) == {1: {"loss": 7.0}}
        assert store.results_pending(exp.id) == [a]
        store.record_results(a, {}, final=True)
        assert store.results_pending(exp.id) == [] and store.results_pending(other.id) == []
        with pytest.raises(NotFoundError):
            store.record_results(10_000, {"loss": 1.0})
        store.close()
        again = self.open(store_url)  # a new connection reads the same
        assert again.results(exp.id, [1]) == {1: {"loss": 0.25, "accuracy": 0.5, "odd": None}}

    def test_series_overwrite_by_job_and_error_lines_join_failed_messages_once(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("curves")
        [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a"), new_job("b")])
        [c] = store.add_work_unit(exp.id, 2, "work_unit", {}, "", [new_job("c")])
        store.mark_launched([(j, "k", {"j": j}, None) for j in (a, b, c)])
        store.record_series(a, {"loss": [(0, 1.0), (10, 0.5)], "acc": [(0, None)]})
        store.record_series(a, {"loss": [(0, 1.0), (10, 0.5), (20, 0.25)]})  # a later read replaces the job's
        store.record_series(c, {})
        assert store.series(exp.id) == {1: {"loss": [(0, 1.0), (10, 0.5), (20, 0.25)]}}
        assert store.series(exp.id, [2]) == {}
        with pytest.raises(NotFoundError):
            store.record_series(10_000, {"loss": [(0, 1.0)]})
        store.record_states([(b, JobState(Status.FAILED, "exit code 1", 1)), (c, JobState(Status.COMPLETED, "", 0))])
        for _ in range(2):  # a second read (another observer) adds nothing
            store.record_error_line(b, "RuntimeError: NaN loss")
            store.record_error_line(c, "not an error: it completed")
        [unit] = store.work_units(exp.id, [1])
        assert unit.jobs[1].message == "exit code 1; error: RuntimeError: NaN loss"
        assert store.work_units(exp.id, [2])[0].jobs[0].message == ""

    def test_links_overwrite_by_name(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("links")
        [a] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a")])
        [b] = store.add_work_unit(exp.id, 2, "work_unit", {}, "", [new_job("b")])
        store.record_links([])
        assert store.links(exp.id) == {}
        url = "https://wandb.ai/me/p/runs/ü?q='x' $y"
        store.record_links([(a, "wandb", "old"), (b, "tensorboard", "/tb/2")])
        store.record_links([(a, "wandb", url), (a, "neptune", "n")])
        assert store.links(exp.id) == {1: {"wandb": url, "neptune": "n"}, 2: {"tensorboard": "/tb/2"}}
        assert store.links(exp.id, [2]) == {2: {"tensorboard": "/tb/2"}} and store.links(exp.id + 1) == {}

    def test_unit_summaries_match_the_folded_work_units(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("summaries")
        [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {"lr": 0.1}, "", [new_job("a"), new_job("b")])
        [c] = store.add_work_unit(exp.id, 2, "auxiliary", {"x": "ü"}, "", [new_job("c")])
        store.add_work_unit(exp.id, 3, "work_unit", {}, "", [])  # no jobs: no start, no end
        store.mark_launched([(a, "k", {}, None), (b, "k", {}, None), (c, "k", {}, None)])
        store.record_states([(a, JobState(Status.RUNNING)), (b, JobState(Status.RUNNING)),
                             (c, JobState(Status.RUNNING))])
        store.record_states([(a, JobState(Status.FAILED, "exit 2", 2)), (b, JobState(Status.FAILED, "exit 3", 3)),
                             (c, JobState(Status.COMPLETED, "done", 0))])
        summaries = store.unit_summaries(exp.id)
        assert summaries == MetadataStore.unit_summaries(store, exp.id)  # one query, the same answer
        assert [(s.id, s.status, s.message) for s in summaries] == [
            (1, Status.FAILED, "exit 2; exit 3"), (2, Status.COMPLETED, ""), (3, Status.LAUNCHING, "")]
        assert summaries[0].started_at is not None and summaries[0].ended_at is not None
        assert summaries[2].started_at is None and summaries[2].ended_at is None

    def test_unit_rows_hold_what_work_units_hold(self, store_url):
        """``unit_rows`` (what ``xcore show`` reads) is ``work_units`` as plain dicts: the same
        fields in the same order, statuses as text, a filter by unit id, an unreadable row kept."""
        import attrs

        store = self.open(store_url)
        exp = store.create_experiment("rows")
        [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {"lr": 0.5, "s": "é"}, "i1", [new_job("a"), new_job("b")])
        [c] = store.add_work_unit(exp.id, 2, "auxiliary", [1, 2], "", [new_job("c", env={"X": "y z"})])
        store.add_work_unit(exp.id, 3, "work_unit", {}, "", [])
        store.mark_launched([(a, "k", {"pid": 1, "n": [1.5]}, "/log")])
        store.record_states([(a, JobState(Status.COMPLETED, "exit code 0", 0, 10.0, 12.5)),
                             (c, JobState(Status.RUNNING, "running", None, 11.0))])
        expected = [{"id": u.id, "role": u.role, "args": u.args, "identity": u.identity, "created_at": u.created_at,
                     "jobs": [{**attrs.asdict(j, recurse=False), "status": j.status.value} for j in u.jobs]}
                    for u in store.work_units(exp.id)]
        rows = store.unit_rows(exp.id)
        assert rows == expected
        assert [list(j) for u in rows for j in u["jobs"]] == [[f.name for f in attrs.fields(type(j))]
                                                              for u in store.work_units(exp.id) for j in u.jobs]
        assert [u["id"] for u in store.unit_rows(exp.id, [2, 3])] == [2, 3]
        assert store.unit_rows(exp.id, [9]) == []
        assert [j["id"] for u in rows for j in u["jobs"]] == [a, b, c]

    # -- the notifications outbox ---------------------------------------------------------

    def test_notifications_are_recorded_once_and_taken_by_one_claimant(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("outbox")
        body = '{"text": "unit \'1\' failed \u00e9 $HOME `x`"}'
        event = NewNotification(f"exp-{exp.id}/unit-1/failed/attempt-1", "hook", exp.id, "unit_failed", body)
        store.add_notifications([event, event, NewNotification(event.event_id, "mail", exp.id, "unit_failed", body)])
        store.add_notifications([event])  # a second observer of the same event adds nothing
        rows = store.notifications(exp.id)
        assert sorted((n.sink, n.state, n.attempts, n.body) for n in rows) == [
            ("hook", "pending", 0, body), ("mail", "pending", 0, body)]
        taken = store.take_notifications("a", 60.0)
        assert sorted(n.sink for n in taken) == ["hook", "mail"] and all(n.attempts == 1 for n in taken)
        assert store.take_notifications("b", 60.0) == []  # taken: no one else gets them
        store.finish_notification(event.event_id, "hook", "b", "sent")  # not b's: ignored
        store.finish_notification(event.event_id, "hook", "a", "sent")
        store.finish_notification(event.event_id, "mail", "a", "pending", "HTTP 500", time.time() - 1)
        by_sink = {n.sink: n for n in store.notifications(exp.id)}
        assert (by_sink["hook"].state, by_sink["hook"].sent_at is not None) == ("sent", True)
        assert (by_sink["mail"].state, by_sink["mail"].last_error) == ("pending", "HTTP 500")
        again = store.take_notifications("b", 60.0)  # a failed try is due again: its attempts go on
        assert [(n.sink, n.attempts) for n in again] == [("mail", 2)]
        store.finish_notification(event.event_id, "mail", "b", "failed", "gave up")
        assert store.take_notifications("c", 60.0) == []
        assert [n.sink for n in store.notifications(states=["failed"])] == ["mail"]

    def test_notification_trouble_counts_an_experiments_failed_and_retrying_deliveries(self, store_url):
        store = self.open(store_url)
        exp, other = store.create_experiment("trouble"), store.create_experiment("other")
        assert store.notification_trouble(exp.id) == {"failed": 0, "retrying": 0}
        store.add_notifications([NewNotification(f"e/{n}", "hook", exp.id, "unit_failed", "{}") for n in range(4)]
                                + [NewNotification("o/1", "hook", other.id, "unit_failed", "{}")])
        taken = {n.event_id for n in store.take_notifications("a", 60.0)}
        assert len(taken) == 5
        store.finish_notification("e/0", "hook", "a", "sent")
        store.finish_notification("e/1", "hook", "a", "pending", "HTTP 500", time.time() + 60)
        store.finish_notification("e/2", "hook", "a", "failed", "gave up")
        store.finish_notification("o/1", "hook", "a", "failed", "gave up")
        # e/3 is still being sent on its first try: no trouble yet
        assert store.notification_trouble(exp.id) == {"failed": 1, "retrying": 1}
        assert store.notification_trouble(other.id) == {"failed": 1, "retrying": 0}

    def test_a_taken_notification_whose_lease_ran_out_is_taken_again(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("outbox lease")
        store.add_notifications([NewNotification("e/1", "hook", exp.id, "experiment_ended", "{}")])
        assert len(store.take_notifications("dead", -1.0)) == 1  # its lease already over
        assert [n.attempts for n in store.take_notifications("alive", 60.0)] == [2]
        store.finish_notification("e/1", "hook", "dead", "sent")  # the dead claimant's late word is ignored
        assert store.notifications(exp.id)[0].state == "sending"

    @_across_processes
    def test_each_due_notification_is_taken_by_exactly_one_of_many_processes(self, store_url):
        store = self.open(store_url)
        exp = store.create_experiment("outbox race")
        store.add_notifications([NewNotification(f"e/{i}", "hook", exp.id, "unit_failed", "{}") for i in range(30)])
        ctx = multiprocessing.get_context("spawn")
        barrier, out = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_take_all, args=(store_url, barrier, out)) for _ in range(3)]
        for proc in procs:
            proc.start()
        taken = [out.get(timeout=120) for _ in procs]
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        assert Counter(key for got in taken for key in got) == Counter((f"e/{i}", "hook") for i in range(30))
