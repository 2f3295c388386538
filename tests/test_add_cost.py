"""What made ``experiment.add`` cheaper (issue 14) keeps its guarantees: a unit's future
without a Condition still wakes every waiter, and a unit recorded with its tracker links in
one transaction is on disk, whole, before ``add`` returns."""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
import tracemalloc
from pathlib import Path

import pytest

import xcore as xm
from xcore.runtime.launcher import LazyFuture
from xcore.store.records import NewJob
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


def test_each_add_is_on_disk_with_its_links_when_add_returns(xcore_home: Path):
    """No batching of records: another process's connection sees every unit, job and link as
    soon as its add returns, before anything is launched."""
    plugin_host({"fake": fake})
    with xm.create_experiment("durable") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        executor = fake.FakeExecutor(hold=True)
        reader = sqlite3.connect(xcore_home / "xcore.db")
        for i in range(1, 6):
            experiment.add(xm.Job(exe, executor, args={"seed": i}))
            counts = [reader.execute(f"SELECT COUNT(*) FROM {table} WHERE experiment_id = ?",
                                     (experiment.experiment_id,)).fetchone()[0]
                      for table in ("work_units", "jobs", "job_links")]
            assert counts == [i, i, i]
        reader.close()


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
