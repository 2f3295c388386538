"""What the launcher does after the adds of a big sweep (issue 14, SSH launch at 10,000):
recording the handles of N submitted jobs reads nothing into Python (the history and the
units' statuses are one statement per 500 jobs); recorded states read dense ids in one range; a
handle of plain fields is written without cattrs, exactly as cattrs writes it."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import attrs

from xcore.hooks.kinds import KindRegistry
from xcore.hooks.serialization import Serializer
from xcore.model.execution import JobHandle
from xcore.model.status import JobState, Status
from xcore.store.records import NewJob
from xcore.store.sqlite import SqliteStore


def _job(name: str = "j") -> NewJob:
    return NewJob(name=name, executor_kind="fake.FakeExecutor", executor={}, executable={}, args=[], env={})


def _statements(store: SqliteStore) -> list[str]:
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    return seen


def test_marking_many_jobs_launched_reads_nothing_into_python(tmp_path: Path):
    """The history and the units' statuses are one statement per 500 launched ids (not one
    per job, and no read of the jobs first); only the handles are one update per job."""
    store = SqliteStore(tmp_path / "xcore.db")
    experiment = store.create_experiment("t")
    with store.transaction():
        ids = [store.add_work_unit(experiment.id, unit, "work_unit", {}, "", [_job()])[0] for unit in range(1, 1201)]
        # Unit 1201 has two jobs: one launched below, one failed before: the unit is FAILED.
        pair = store.add_work_unit(experiment.id, 1201, "work_unit", {}, "", [_job("a"), _job("b")])
    store.record_states([(pair[1], JobState(Status.FAILED, "boom"))])
    launched = [(job_id, "test.Handle", {"kind": "test.Handle", "n": job_id}, f"/log/{job_id}")
                for job_id in [*ids, pair[0]]]
    seen = _statements(store)
    store.mark_launched(launched)
    store._db.set_trace_callback(None)
    assert [s for s in seen if s.lstrip().upper().startswith("SELECT")] == []
    assert len([s for s in seen if s.lstrip().startswith("INSERT INTO job_events")]) == 3  # 1,201 ids
    assert len([s for s in seen if s.lstrip().startswith("UPDATE work_units")]) == 3
    assert len([s for s in seen if s.lstrip().startswith("UPDATE jobs")]) == len(launched)
    reader = sqlite3.connect(tmp_path / "xcore.db")
    units = dict(reader.execute("SELECT id, status FROM work_units WHERE experiment_id = ?", (experiment.id,)))
    assert {units[u] for u in range(1, 1201)} == {"PENDING"} and units[1201] == "FAILED"
    rows = reader.execute("SELECT status, handle, log_path FROM jobs WHERE id = ?", (ids[7],)).fetchone()
    assert rows == ("PENDING", f'{{"kind": "test.Handle", "n": {ids[7]}}}', f"/log/{ids[7]}")
    events = reader.execute("SELECT COUNT(*) FROM job_events WHERE status = 'PENDING'").fetchone()[0]
    assert events == 1201
    store.mark_launched(launched)  # marking again appends no event and changes no status
    assert reader.execute("SELECT COUNT(*) FROM job_events WHERE status = 'PENDING'").fetchone()[0] == 1201
    reader.close()


def test_sparse_ids_are_read_in_chunks(tmp_path: Path):
    """Ids spread over a wide range (other kinds' jobs between them) are not read as a range
    when their states are recorded; marking them launched reads none of them."""
    store = SqliteStore(tmp_path / "xcore.db")
    experiment = store.create_experiment("t")
    with store.transaction():
        ids = [store.add_work_unit(experiment.id, unit, "work_unit", {}, "", [_job()] * 3)[0]
               for unit in range(1, 602)]
    seen = _statements(store)
    store.mark_launched([(job_id, "test.Handle", {}, None) for job_id in ids])
    assert [s for s in seen if "SELECT" in s and not s.lstrip().startswith(("INSERT", "UPDATE"))] == []
    store.record_states([(job_id, JobState(Status.RUNNING)) for job_id in ids])
    store._db.set_trace_callback(None)
    reads = [s for s in seen if s.lstrip().startswith("SELECT") and "FROM jobs WHERE id IN" in s]
    assert len(reads) == 4  # 601 ids in chunks of 500, for the states and again for their units
    reader = sqlite3.connect(tmp_path / "xcore.db")
    assert {s for (s,) in reader.execute("SELECT DISTINCT status FROM work_units")} == {"RUNNING"}
    assert reader.execute("SELECT COUNT(*) FROM jobs WHERE status = 'LAUNCHING'").fetchone()[0] == 1202
    reader.close()


@attrs.define
class _Handle(JobHandle):
    job_id: str
    task: int
    at: float = 0.0
    local: bool = False
    note: str | None = None


@attrs.define
class _Structured(JobHandle):
    job_id: str
    extra: list[str] = attrs.field(factory=list)


def _serializer() -> Serializer:
    registry = KindRegistry()
    registry.add("test.Handle", _Handle, "test")
    registry.add("test.Structured", _Structured, "test")
    return Serializer(registry)


def test_a_plain_handle_is_dumped_without_cattrs_as_cattrs_would():
    serializer = _serializer()
    handle = _Handle("12", 3, 1.5, True, None, log_path="/l")
    data = serializer.dump(handle)
    assert serializer._converter is None  # cattrs was not needed
    assert data["kind"] == "test.Handle" and data["job_id"] == "12" and data["log_path"] == "/l"
    assert data == serializer._conv.unstructure(handle)
    assert list(data) == list(serializer._conv.unstructure(handle))  # same keys, same order
    assert serializer.load(data) == handle


def test_a_handle_with_a_list_is_dumped_plainly_and_an_unknown_value_goes_through_cattrs():
    serializer = _serializer()
    handle = _Structured("12", extra=["a", "b c"])
    data = serializer.dump(handle)
    assert serializer._converter is None  # a list of strings is plain JSON
    assert data == serializer._conv.unstructure(handle) and serializer.load(data) == handle
    odd = _Structured("12", extra=("a", "b c"))  # type: ignore[arg-type]  # a tuple: cattrs decides
    fresh = _serializer()
    assert fresh.dump(odd)["extra"] == serializer._conv.unstructure(odd)["extra"]
    assert fresh._converter is not None


def test_xcore_launch_collects_less_often_and_leaves_the_sweep_to_the_exit(tmp_path: Path):
    """`xcore launch` runs the script with higher collector thresholds (the sweep's objects
    live to the end; walking them every 700 allocations was a sixth of the CPU at 10,000),
    and once the launch is recorded freezes what exists: the interpreter's last collection
    does not walk every unit again on the way out."""
    from core_helpers import run_xcore_fake, write_fake_script

    script = write_fake_script(tmp_path / "launch.py", f"""
import atexit
import gc
atexit.register(lambda: print("FROZEN", gc.get_freeze_count() > 1000, flush=True))
print("THRESHOLDS", gc.get_threshold(), flush=True)
with xm.create_experiment("freeze") as e:
    [exe] = e.package([xm.binary(fake.FakeSpec(), {sys.executable!r}, args=["-c", "pass"])])
    e.add(xm.Job(exe, fake.FakeExecutor()))
""")
    result = run_xcore_fake("launch", "--wait", str(script))
    assert result.returncode == 0, result.stderr
    assert "FROZEN True" in result.stdout
    # The script's young objects are collected every 20,000 allocations, not every 700.
    assert "THRESHOLDS (20000, 20, 20)" in result.stdout


def test_marking_jobs_launched_never_holds_every_handles_json_at_once(tmp_path: Path):
    """The launcher's peak memory at 10,000 tasks includes this step: each handle's JSON is
    made as the update reaches it, and the jobs' rows are dropped before it."""
    import tracemalloc

    store = SqliteStore(tmp_path / "xcore.db")
    experiment = store.create_experiment("t")
    with store.transaction():
        ids = [store.add_work_unit(experiment.id, unit, "work_unit", {}, "", [_job()])[0] for unit in range(1, 2001)]
    launched = [(job_id, "test.Handle", {"kind": "test.Handle", "path": f"/{job_id}/" + "x" * 2000}, None)
                for job_id in ids]  # 2,000 handles of 2 KB: 4 MB of JSON if encoded all at once
    tracemalloc.start()
    try:
        store.mark_launched(launched)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, peak
    reader = sqlite3.connect(tmp_path / "xcore.db")
    assert reader.execute("SELECT COUNT(*) FROM jobs WHERE status = 'PENDING' AND length(handle) > 2000").fetchone() \
        == (2000,)
    reader.close()


class _Tracked(dict):
    """A dumped handle whose lifetime a test counts."""


def test_the_handles_of_a_launch_are_dumped_one_at_a_time_as_they_are_recorded(xcore_home, monkeypatch):
    """Issue 31: 100,000 dumped handles held at once were ~45 MiB of the launcher's peak; each is
    now dumped as the store writes it, so only a few exist at any moment."""
    import weakref

    import xcore as xm
    from xcore.testing import fake, plugin_host

    host = plugin_host({"fake": fake})
    alive, most = [0], [0]
    real_dump = host.serializer.dump

    def freed() -> None:
        alive[0] -= 1

    def tracked_dump(value, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        dumped = real_dump(value, *args, **kwargs)
        if not isinstance(value, fake.FakeHandle):  # executors, executables: dumped as the adds record them
            return dumped
        tracked = _Tracked(dumped)
        weakref.finalize(tracked, freed)
        alive[0] += 1
        most[0] = max(most[0], alive[0])
        return tracked

    monkeypatch.setattr(host.serializer, "dump", tracked_dump)
    with xm.create_experiment("dumps") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for _ in range(200):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    assert alive[0] == 0 < most[0] <= 3, f"{most[0]} of 200 dumped handles held at once"
    jobs = experiment._all_jobs()
    assert len(jobs) == 200 and all(job.handle for job in jobs)
