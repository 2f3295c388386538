"""What made ``experiment.add`` cheaper (issue 14) keeps its guarantees: a unit's future
without a Condition still wakes every waiter; adds are committed in groups, each unit whole
with its tracker links, at the points XManager promises (a full group, a resolved future,
before any launch, the end of the block); a refused group fails loudly and loses nothing
recorded."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import sqlite3
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import xcore as xm
from xcore.errors import StoreError
from xcore.model.status import Status
from xcore.runtime.launcher import LazyFuture, UnitTicket
from xcore.store.records import NewJob, UnitWrite
from xcore.store.sqlite import SqliteStore
from xcore.testing import fake, plugin_host


def test_lazy_future_settled_before_anyone_waits():
    future = LazyFuture()
    future.set_result(7)
    assert "_made_condition" not in future.__dict__  # nobody waited: no Condition was made
    assert future.done() and future.result(timeout=1) == 7
    seen = []
    future.add_done_callback(lambda f: seen.append(f.result()))
    assert seen == [7]
    with pytest.raises(concurrent.futures.InvalidStateError):
        future.set_result(8)


def test_lazy_future_wakes_a_thread_and_a_coroutine_already_waiting():
    future = LazyFuture()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(future.result(timeout=10)))
    waiter.start()

    async def await_it() -> object:
        return await asyncio.wrap_future(future)

    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(await_it())
        loop.call_later(0.05, lambda: threading.Thread(target=future.set_result, args=("done",)).start())
        assert loop.run_until_complete(asyncio.wait_for(task, 10)) == "done"
    finally:
        loop.close()
    waiter.join(10)
    assert got == ["done"]


def test_lazy_future_exception_and_cancel():
    failed = LazyFuture()
    failed.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        failed.result(timeout=1)
    cancelled = LazyFuture()
    assert cancelled.cancel() and cancelled.cancelled()


def test_a_batch_of_submitted_jobs_settles_each_unit_once_all_its_jobs_are_done():
    """``UnitTicket.jobs_done`` (one lock for a whole submission) settles what ``job_done``
    would: a unit of two jobs only with its second, a waiter woken, a unit that had a
    failed job with that error, a plain Future too."""
    single, pair, waited, failing = LazyFuture(), LazyFuture(), LazyFuture(), LazyFuture()
    plain: concurrent.futures.Future = concurrent.futures.Future()
    tickets = [UnitTicket(single, "single", 1), UnitTicket(pair, "pair", 2), UnitTicket(waited, "waited", 1),
               UnitTicket(failing, "failing", 2), UnitTicket(plain, "plain", 1)]
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(waited.result(timeout=10)))
    waiter.start()
    deadline = time.monotonic() + 10
    while "_made_condition" not in waited.__dict__:  # the waiter is waiting
        assert time.monotonic() < deadline
        time.sleep(0.005)
    tickets[3].job_done(ValueError("one job failed to start"))
    UnitTicket.jobs_done([tickets[0], tickets[1], tickets[2], tickets[3], tickets[4]])
    waiter.join(10)
    assert "_made_condition" not in single.__dict__ and single._state == "FINISHED"  # settled without a Condition
    assert got == ["waited"] and single.result(timeout=0) == "single" and plain.result(timeout=0) == "plain"
    assert not pair.done()  # one of its two jobs submitted so far
    with pytest.raises(ValueError, match="failed to start"):
        failing.result(timeout=0)
    UnitTicket.jobs_done([tickets[1]])
    assert pair.result(timeout=0) == "pair"


def test_lazy_futures_are_smaller_than_futures():
    def size(make: type) -> int:
        tracemalloc.start()
        held = [make() for _ in range(1000)]
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(held) == 1000
        return used

    assert size(LazyFuture) < size(concurrent.futures.Future) / 2


def _job() -> NewJob:
    return NewJob(name="j", executor_kind="fake.FakeExecutor", executor={}, executable={}, args=[], env={})


def test_unit_and_links_are_one_transaction(tmp_path: Path):
    store = SqliteStore(tmp_path / "xcore.db")
    experiment = store.create_experiment("t")
    other = sqlite3.connect(tmp_path / "xcore.db")
    with store.transaction():
        [job_id] = store.add_work_unit(experiment.id, 1, "work_unit", {}, "", [_job()])
        store.record_links([(job_id, "tracker", "https://tracker.invalid/1")])
        assert other.execute("SELECT COUNT(*) FROM work_units").fetchone()[0] == 0  # not committed yet
    assert other.execute("SELECT COUNT(*) FROM work_units").fetchone()[0] == 1
    assert other.execute("SELECT COUNT(*) FROM job_links").fetchone()[0] == 1
    with pytest.raises(RuntimeError), store.transaction():  # a failure records none of it
        store.add_work_unit(experiment.id, 2, "work_unit", {}, "", [_job()])
        raise RuntimeError("the links could not be made")
    assert other.execute("SELECT COUNT(*) FROM work_units").fetchone()[0] == 1
    other.close()


def _counts(reader: sqlite3.Connection, experiment_id: int) -> list[int]:
    """Committed rows of the experiment, as another process sees them (one snapshot: a group
    committed meanwhile by the recorder's thread is seen in all three tables or in none)."""
    reader.execute("BEGIN")
    try:
        return [reader.execute(f"SELECT COUNT(*) FROM {table} WHERE experiment_id = ?",
                               (experiment_id,)).fetchone()[0]
                for table in ("work_units", "jobs", "job_links")]
    finally:
        reader.execute("COMMIT")


def test_adds_are_committed_in_groups_and_durable_at_each_promised_point(xcore_home: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    """XManager's durability: an add is in the store, whole with its links, once its group is
    full, once its future resolves, before any job reaches a backend, and when the block ends."""
    monkeypatch.setenv("XCORE_RECORD_GROUP", "4")
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "600")  # no commit by age in this test
    plugin_host({"fake": fake})
    seen_at_launch: list[tuple[int, int]] = []
    with xm.create_experiment("durable") as experiment:
        reader = sqlite3.connect(xcore_home / "xcore.db", check_same_thread=False)
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        executor = fake.FakeExecutor(hold=True)
        host = experiment._host
        real_launch = host.launch

        def checked_launch(kind: str, requests: list, context: object) -> list:
            for request in requests:  # every job handed to the backend is committed already
                row = reader.execute("SELECT COUNT(*) FROM jobs WHERE id = ? AND work_unit_id = ?",
                                     (request.job_id, request.work_unit_id)).fetchone()
                seen_at_launch.append((request.work_unit_id, row[0]))
            return real_launch(kind, requests, context)

        monkeypatch.setattr(host, "launch", checked_launch)
        futures = [experiment.add(xm.Job(exe, executor, args={"seed": i})) for i in range(1, 4)]
        assert _counts(reader, experiment.experiment_id) == [0, 0, 0]  # a group of 3: not committed yet
        futures.append(experiment.add(xm.Job(exe, executor, args={"seed": 4})))
        deadline = time.monotonic() + 10  # the 4th filled the group: one commit, by the background thread
        while _counts(reader, experiment.experiment_id) != [4, 4, 4]:
            assert _counts(reader, experiment.experiment_id) == [0, 0, 0], "a group was committed in part"
            assert time.monotonic() < deadline, "a full group was not committed"
            time.sleep(0.01)
        assert experiment._launcher.recorder.commits == 1
        fifth = experiment.add(xm.Job(exe, executor, args={"seed": 5}))
        assert _counts(reader, experiment.experiment_id) == [4, 4, 4]
        assert fifth.result(timeout=30).work_unit_id == 5  # its future resolved: recorded (and launched)
        assert _counts(reader, experiment.experiment_id) == [5, 5, 5]
        experiment.add(xm.Job(exe, executor, args={"seed": 6}))
    assert _counts(reader, experiment.experiment_id) == [6, 6, 6]  # the block ended
    assert sorted(seen_at_launch) == [(unit, 1) for unit in range(1, 7)]
    units = experiment._store.work_units(experiment.experiment_id)
    assert [u.id for u in units] == list(range(1, 7)) and [u.args for u in units] == [{"seed": i} for i in range(1, 7)]
    reader.close()


def test_a_lone_add_is_committed_by_age(xcore_home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "0.05")
    plugin_host({"fake": fake})
    with xm.create_experiment("age") as experiment:
        reader = sqlite3.connect(xcore_home / "xcore.db", check_same_thread=False)
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
        deadline = time.monotonic() + 10
        while _counts(reader, experiment.experiment_id)[0] == 0:
            assert time.monotonic() < deadline, "a pending add was not committed by age"
            time.sleep(0.01)
        assert _counts(reader, experiment.experiment_id) == [1, 1, 1]
    reader.close()


def test_a_thousand_adds_are_a_few_commits_with_specs_encoded_once_per_group(xcore_home: Path,
                                                                             monkeypatch: pytest.MonkeyPatch):
    """The cost of issue 14: one commit and one JSON encoding of the shared executor and
    executable per group, not per add."""
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "600")
    plugin_host({"fake": fake})
    calls: list[int] = []
    real = SqliteStore.record_adds

    def counting(self: SqliteStore, writes: list, **kwargs: object) -> list[list[int]]:
        calls.append(len(writes))
        return real(self, writes, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteStore, "record_adds", counting)
    encoded: list[object] = []
    real_dumps = json.dumps
    monkeypatch.setattr("xcore.store.sqlite.json.dumps", lambda obj, *a, **k: (encoded.append(obj),
                                                                                real_dumps(obj, *a, **k))[1])
    with xm.create_experiment("groups") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        executor = fake.FakeExecutor(hold=True)
        for i in range(1000):
            experiment.add(xm.Job(exe, executor, args={"seed": i}))
    assert sum(calls) == 1000 and len(calls) <= 5, calls  # groups of 256 (XCORE_RECORD_GROUP)
    specs = [obj for obj in encoded if isinstance(obj, dict) and ("requirements" in obj or "path" in obj)]
    assert 0 < len(specs) <= 2 * len(calls), len(specs)


def test_a_group_the_store_refuses_fails_loudly_and_keeps_what_was_recorded(xcore_home: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XCORE_RECORD_GROUP", "3")
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "600")
    plugin_host({"fake": fake})
    real = SqliteStore.record_adds
    message = "The disk holding the metadata store is full (database or disk is full): free some space"

    def failing_second_group(self: SqliteStore, writes: list, **kwargs: object) -> list[list[int]]:
        if writes[0].work_unit_id == 4:
            raise StoreError(message)
        return real(self, writes, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteStore, "record_adds", failing_second_group)
    launched: list[int] = []
    with pytest.raises(StoreError, match="disk is full") as raised:
        with xm.create_experiment("refused") as experiment:
            exe, executor = _held_fake_counting_launches(experiment, monkeypatch, launched)
            futures = [experiment.add(xm.Job(exe, executor, args={"seed": i}), identity=f"u{i}") for i in range(1, 6)]
            experiment.add(xm.Job(exe, executor, args={"seed": 6}))  # fills the second group: raises
    assert str(raised.value) == message  # the store's own error, unchanged
    assert "work units 4-6 were not recorded" in "".join(getattr(raised.value, "__notes__", []))
    for future in futures[3:]:
        with pytest.raises(StoreError):
            future.result(timeout=10)
    units = experiment._store.work_units(experiment.experiment_id)
    assert [u.id for u in units] == [1, 2, 3]  # the first group is kept
    assert sorted(experiment.work_units) == [1, 2, 3] and sorted(experiment._identities) == ["u1", "u2", "u3"]
    assert sorted(launched) == [1, 2, 3]  # and only what was recorded reached the backend
    assert experiment._store.get_experiment(experiment.experiment_id).launch_status == "LAUNCH_FAILED"


def test_read_jobs_share_one_decoded_executor(tmp_path: Path):
    """`xcore show` of a sweep holds one executor and one executable, not one per job."""
    store = SqliteStore(tmp_path / "xcore.db")
    experiment = store.create_experiment("t")
    spec = {"kind": "fake.FakeExecutor", "hold": True, "requirements": {"cpu": 1}}
    for unit in (1, 2, 3):
        job = NewJob(name="j", executor_kind="fake.FakeExecutor", executor=spec, executable={"name": "x"},
                     args=[str(unit)], env={})
        store.add_work_unit(experiment.id, unit, "work_unit", {}, "", [job])
    jobs = [job for unit in store.work_units(experiment.id) for job in unit.jobs]
    assert [job.executor for job in jobs] == [spec] * 3 and [job.args for job in jobs] == [["1"], ["2"], ["3"]]
    assert jobs[0].executor is jobs[1].executor is jobs[2].executor
    assert jobs[0].executable is jobs[2].executable


@pytest.mark.parametrize("where", ["adds pending", "between a commit and the queue"])
def test_ctrl_c_leaves_every_recorded_job_cancelled_and_nothing_launched(xcore_home: Path,
                                                                        monkeypatch: pytest.MonkeyPatch, where: str):
    """Ctrl-C with adds waiting for their group's commit (they are committed, then cancelled:
    their ids were handed out), or landing right after a commit, before its jobs were queued
    (the lease's leftovers are cancelled): no job stays LAUNCHING, none reaches the backend."""
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "600")
    plugin_host({"fake": fake})
    launched: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        with xm.create_experiment("interrupted") as experiment:
            exe, executor = _held_fake_counting_launches(experiment, monkeypatch, launched)
            for i in range(1, 6):
                experiment.add(xm.Job(exe, executor, args={"seed": i}))
            if where != "adds pending":
                def interrupted(group: object, ids: object) -> None:
                    raise KeyboardInterrupt

                monkeypatch.setattr(experiment._launcher.recorder, "_on_recorded", interrupted)
                experiment._launcher.recorder.flush()
            raise KeyboardInterrupt
    jobs = [job for unit in experiment._store.work_units(experiment.experiment_id) for job in unit.jobs]
    assert [job.work_unit_id for job in jobs] == [1, 2, 3, 4, 5]
    assert all(job.status is Status.CANCELLED and "interrupted" in job.message for job in jobs), jobs
    assert launched == []



def _held_fake_counting_launches(experiment: Any, monkeypatch: pytest.MonkeyPatch,
                                 launched: list[int]) -> tuple[Any, Any]:
    """A packaged fake executable and a holding fake executor for ``experiment``; the work unit
    id of every job handed to the backend is appended to ``launched``."""
    [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
    real_launch = experiment._host.launch
    monkeypatch.setattr(experiment._host, "launch", lambda kind, requests, context: (
        launched.extend(r.work_unit_id for r in requests), real_launch(kind, requests, context))[1])
    return exe, fake.FakeExecutor(hold=True)

def _gated_store(monkeypatch: pytest.MonkeyPatch, gate: threading.Event, refuse_unit: int | None,
                 gated_unit: int) -> list[int]:
    """SqliteStore.record_adds that waits for ``gate`` before writing the group starting at
    ``gated_unit`` and refuses the group starting at ``refuse_unit``; returns the groups' first units."""
    real = SqliteStore.record_adds
    groups: list[int] = []

    def gated(self: SqliteStore, writes: list, **kwargs: object) -> list[list[int]]:
        groups.append(writes[0].work_unit_id)
        if writes[0].work_unit_id == gated_unit:
            assert gate.wait(30), "the test never opened the gate"
        if writes[0].work_unit_id == refuse_unit:
            raise StoreError("The disk holding the metadata store is full (database or disk is full)")
        return real(self, writes, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteStore, "record_adds", gated)
    return groups


def test_a_group_refused_in_the_background_fails_it_and_every_add_after_it(xcore_home: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """Full groups are committed by the recorder's thread while the script keeps adding. The
    store refuses the second group while adds queued after it wait: exactly the first group is
    recorded and launched, the error surfaces at the next add and at the block's end, and every
    later unit's future fails (the store keeps an unbroken prefix of the adds)."""
    monkeypatch.setenv("XCORE_RECORD_GROUP", "3")
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "600")
    monkeypatch.setattr(SqliteStore, "writes_in_background", True)  # as a server store's recorder works
    plugin_host({"fake": fake})
    gate = threading.Event()
    groups = _gated_store(monkeypatch, gate, refuse_unit=4, gated_unit=4)
    launched: list[int] = []
    futures: list[xm.LaunchFuture] = []
    raised_at = None
    with pytest.raises(StoreError, match="disk is full") as at_end:
        with xm.create_experiment("refused in the background") as experiment:
            exe, executor = _held_fake_counting_launches(experiment, monkeypatch, launched)
            futures += [experiment.add(xm.Job(exe, executor, args={"seed": i}), identity=f"u{i}") for i in range(1, 9)]
            deadline = time.monotonic() + 10
            while groups != [1, 4]:  # the 2nd group is with the store (held at the gate), 7 and 8 wait
                assert time.monotonic() < deadline, groups
                time.sleep(0.01)
            gate.set()
            deadline = time.monotonic() + 10
            with pytest.raises(StoreError, match="disk is full") as at_add:
                for i in range(9, 1000):  # the script goes on adding: an add soon says the store refused
                    assert time.monotonic() < deadline, "no add raised the refused group's error"
                    raised_at = i
                    futures.append(experiment.add(xm.Job(exe, executor, args={"seed": i}), identity=f"u{i}"))
                    time.sleep(0.005)
            notes = "".join(getattr(at_add.value, "__notes__", []))
            assert f"work units 4-{raised_at - 1} were not recorded" in notes, notes
            assert f"work unit {raised_at}, added after it, was not recorded either" in notes, notes
    assert at_end.value is at_add.value  # the block's end raises it too (once recorded in the launch's errors)
    for future in futures[3:]:
        with pytest.raises(StoreError):
            future.result(timeout=10)
    assert [u.id for u in experiment._store.work_units(experiment.experiment_id)] == [1, 2, 3]
    assert sorted(experiment.work_units) == [1, 2, 3] and sorted(experiment._identities) == ["u1", "u2", "u3"]
    assert sorted(launched) == [1, 2, 3]  # nothing of the refused group, or after it, reached the backend
    assert experiment._store.get_experiment(experiment.experiment_id).launch_status == "LAUNCH_FAILED"


def test_adds_go_on_while_a_group_is_written_but_only_two_full_groups_wait(xcore_home: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    """The script does not wait for the store's write of a full group (the recorder's thread
    does), but it cannot run ahead without bound: with the first commit stuck, an add blocks
    once two more full groups wait (back-pressure); when the store goes on, every add is
    recorded, in add order."""
    monkeypatch.setenv("XCORE_RECORD_GROUP", "2")
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "600")
    monkeypatch.setattr(SqliteStore, "writes_in_background", True)  # as a server store's recorder works
    plugin_host({"fake": fake})
    gate = threading.Event()
    _gated_store(monkeypatch, gate, refuse_unit=None, gated_unit=1)
    returned: list[int] = []
    with xm.create_experiment("back-pressure") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        executor = fake.FakeExecutor(hold=True)

        def script() -> None:
            for i in range(1, 21):
                returned.append(experiment.add(xm.Job(exe, executor, args={"seed": i})).unit.work_unit_id)

        adder = threading.Thread(target=script)
        adder.start()
        deadline = time.monotonic() + 10
        while len(returned) < 6:  # group 1 with the store, groups 2 and 3 waiting for it
            assert time.monotonic() < deadline, returned
            time.sleep(0.01)
        time.sleep(0.2)
        assert returned == [1, 2, 3, 4, 5, 6]  # the 7th add waits for the store
        gate.set()
        adder.join(10)
        assert returned == list(range(1, 21))
    units = experiment._store.work_units(experiment.experiment_id)
    assert [u.id for u in units] == list(range(1, 21))
    assert [u.args for u in units] == [{"seed": i} for i in range(1, 21)]


def test_a_group_of_adds_is_a_few_statements_not_one_per_row(tmp_path: Path):
    """Each statement step lets go of the GIL, which the script's thread then takes: a group's
    300 units and jobs are a few multi-row INSERTs (one per 256 rows), not 600 steps, and every
    row is written exactly, in order, with its job id."""
    store = SqliteStore(tmp_path / "xcore.db")
    experiment = store.create_experiment("t")
    steps: list[str] = []
    store._db.set_trace_callback(steps.append)
    args = ["--a=it's \"quoted\" $HOME", "--b=line\nbreak", "--c=ünï", "--d"]
    writes = [UnitWrite(experiment.id, unit, "work_unit", {"seed": unit, "s": "x y"}, "", [
        NewJob(name=f"j{unit}", executor_kind="fake.FakeExecutor", executor={"e": 1}, executable={"x": 2},
               args=[*args, str(unit)], env={"K": "v w"} if unit % 2 else {})]) for unit in range(1, 301)]
    ids = store.record_adds(writes)
    store._db.set_trace_callback(None)
    inserts = [s for s in steps if s.startswith(("INSERT INTO jobs", "INSERT INTO work_units"))]
    assert len(inserts) == 4  # 256 + 44 rows of each table
    assert [job_ids for job_ids in ids] == [[unit] for unit in range(1, 301)]
    units = store.work_units(experiment.id)
    assert [(u.id, u.args) for u in units] == [(n, {"seed": n, "s": "x y"}) for n in range(1, 301)]
    assert [(j.id, j.name, j.args, j.env, j.status) for u in units for j in u.jobs] == [
        (n, f"j{n}", [*args, str(n)], {"K": "v w"} if n % 2 else {}, Status.LAUNCHING) for n in range(1, 301)]
    assert len(store.job_history(300)) == 1


def test_sqlite_full_groups_are_committed_by_the_add_that_fills_them(xcore_home: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    """SQLite's writes are CPU work of this process: the add that fills a group commits it on
    the script's thread (another thread would only compete for the GIL), so the group is in the
    store when that add returns; a partial group still goes by age, from the background."""
    monkeypatch.setenv("XCORE_RECORD_GROUP", "3")
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "0.05")
    plugin_host({"fake": fake})
    real = SqliteStore.record_adds
    writers: list[tuple[str, list[int]]] = []

    def recording(self: SqliteStore, writes: list, **kwargs: object) -> list[list[int]]:
        writers.append((threading.current_thread().name, [w.work_unit_id for w in writes]))
        return real(self, writes, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteStore, "record_adds", recording)
    with xm.create_experiment("inline groups") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        executor = fake.FakeExecutor(hold=True)
        reader = sqlite3.connect(xcore_home / "xcore.db")
        for i in range(1, 7):
            experiment.add(xm.Job(exe, executor, args={"seed": i}))
            if i % 3 == 0:  # committed before the add returned
                assert reader.execute("SELECT COUNT(*) FROM work_units").fetchone()[0] == i
        experiment.add(xm.Job(exe, executor, args={"seed": 7}))
        deadline = time.monotonic() + 10
        while len(writers) < 3:
            assert time.monotonic() < deadline, writers
            time.sleep(0.01)
        reader.close()
    main = threading.current_thread().name
    assert writers == [(main, [1, 2, 3]), (main, [4, 5, 6]), ("xcore-recorder", [7])]


def test_a_group_refused_on_the_adding_thread_fails_at_that_add(xcore_home: Path, monkeypatch: pytest.MonkeyPatch):
    """The add that fills a group the store refuses raises the store's error: that group's
    futures fail, nothing of it is recorded or launched, the groups before it are, and the
    experiment ends LAUNCH_FAILED with the error."""
    monkeypatch.setenv("XCORE_RECORD_GROUP", "3")
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "600")
    plugin_host({"fake": fake})
    gate = threading.Event()
    gate.set()
    _gated_store(monkeypatch, gate, refuse_unit=4, gated_unit=0)
    launched: list[int] = []
    futures: list[xm.LaunchFuture] = []
    with pytest.raises(StoreError, match="disk is full") as at_end:
        with xm.create_experiment("refused inline") as experiment:
            exe, executor = _held_fake_counting_launches(experiment, monkeypatch, launched)
            futures += [experiment.add(xm.Job(exe, executor, args={"seed": i})) for i in range(1, 6)]
            with pytest.raises(StoreError, match="disk is full") as at_add:
                experiment.add(xm.Job(exe, executor, args={"seed": 6}))
            assert "work units 4-6 were not recorded" in "".join(getattr(at_add.value, "__notes__", []))
    assert at_end.value is at_add.value
    for future in futures[3:]:
        with pytest.raises(StoreError):
            future.result(timeout=10)
    assert [u.id for u in experiment._store.work_units(experiment.experiment_id)] == [1, 2, 3]
    assert sorted(experiment.work_units) == [1, 2, 3]
    assert sorted(launched) == [1, 2, 3]
    assert experiment._store.get_experiment(experiment.experiment_id).launch_status == "LAUNCH_FAILED"


def test_a_loop_of_adds_does_not_wake_the_recorder_thread(xcore_home: Path, monkeypatch: pytest.MonkeyPatch):
    """Waking the background thread costs both threads the GIL: while it waits for an old
    group's age deadline, the adds of new groups (committed by the adds that fill them, on
    SQLite) leave it asleep; a lone add later is still committed by age."""
    monkeypatch.setenv("XCORE_RECORD_GROUP", "4")
    monkeypatch.setenv("XCORE_RECORD_MAX_AGE", "0.3")
    plugin_host({"fake": fake})
    with xm.create_experiment("quiet thread") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        executor = fake.FakeExecutor(hold=True)
        recorder = experiment._launcher.recorder
        wakes: list[int] = []
        notify_all = recorder._cond.notify_all
        monkeypatch.setattr(recorder._cond, "notify_all", lambda: (wakes.append(1), notify_all())[1])
        for i in range(40):
            experiment.add(xm.Job(exe, executor, args={"seed": i}))
        assert recorder.commits == 10 and len(wakes) <= 1, (recorder.commits, len(wakes))
        experiment.add(xm.Job(exe, executor, args={"seed": 40}))
        deadline = time.monotonic() + 10
        while recorder.commits < 11:  # by age, from the background thread
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_a_sweeps_job_and_its_args_are_built_without_copies(monkeypatch: pytest.MonkeyPatch):
    """``xm.Job(exe, executor, args={...})`` with a flat dict of args builds its SequentialArgs
    directly (a few Python calls, not a dozen), and an add renders the job's own args when the
    executable has none to merge them into (no copy), with an environment of its own."""
    import sys

    from xcore.model.job_blocks import job_args_with_overrides

    exe = xm.Executable(name="x")
    executor = fake.FakeExecutor(hold=True)
    calls = [0]

    def count(frame: object, event: str, arg: object) -> None:
        calls[0] += event == "call"

    xm.Job(exe, executor, args={"seed": 0, "lr": 0.2, "name": "b"})  # names seen before, as in a sweep's loop
    sys.setprofile(count)
    try:
        job = xm.Job(exe, executor, args={"seed": 1, "lr": 0.1, "name": "a b"})
    finally:
        sys.setprofile(None)
    assert calls[0] <= 6, calls[0]
    assert job.args.to_argv() == ["--seed=1", "--lr=0.1", "--name=a b"]
    args, env = job_args_with_overrides(job, None)
    assert args is job.args and env == {} and env is not job.env_vars
    with_env = xm.Job(xm.Executable(name="y", env_vars={"A": "1"}), executor, env_vars={"B": "2"})
    assert job_args_with_overrides(with_env, None)[1] == {"A": "1", "B": "2"}


def test_the_collector_runs_less_often_while_an_experiment_block_is_open(xcore_home: Path):
    """A sweep's units stay alive until launched: with Python's default thresholds the collector
    walked them again every 700 allocations. While a block is open the thresholds are raised
    (as `xcore launch` does), then restored; a script's own higher setting is left alone."""
    import gc

    from xcore.runtime.collector import SWEEP_THRESHOLDS as GC_WHILE_OPEN

    plugin_host({"fake": fake})
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        with xm.create_experiment("gc"):
            assert gc.get_threshold() == GC_WHILE_OPEN
            with xm.create_experiment("inner"):
                assert gc.get_threshold() == GC_WHILE_OPEN
            assert gc.get_threshold() == GC_WHILE_OPEN  # the outer block is still open
        assert gc.get_threshold() == (700, 10, 10)
        with pytest.raises(RuntimeError, match="boom"), xm.create_experiment("fails"):
            raise RuntimeError("boom")
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 5, 5)
        with xm.create_experiment("own"):
            assert gc.get_threshold() == (50_000, 5, 5)
        assert gc.get_threshold() == (50_000, 5, 5)
    finally:
        gc.set_threshold(*saved)
