"""One contract for every metadata store: each test runs against SQLite and a real PostgreSQL."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections import Counter

import pytest
from store_contract_helpers import new_job, open_url

from xcore.errors import NotFoundError
from xcore.status import JobState, Status
from xcore.store import MetadataStore


def test_ids_start_at_one_and_fields_round_trip(store_url):
    store = open_url(store_url)
    title = "sweep 'α' \"β\" $HOME `x` \n line2 🙂"
    record = store.create_experiment(title, tags=["a", "b c"], notes="n\tn", script_path="/s p.py",
                                     script_sha256="ab", git_commit="c0ffee", git_dirty=True, user="ü", host="h")
    assert record.id == 1
    [job_id] = store.add_work_unit(1, 1, "work_unit", {"lr": 0.1, "s": "a b$c"}, "ident", [new_job()])
    store.close()
    store = open_url(store_url)  # a new connection sees exactly what was written
    again = store.get_experiment(1)
    assert (again.title, again.tags, again.notes, again.script_path, again.git_dirty, again.user) == (
        title, ["a", "b c"], "n\tn", "/s p.py", True, "ü")
    [unit] = store.work_units(1)
    assert (unit.id, unit.args, unit.identity, [j.id for j in unit.jobs]) == (1, {"lr": 0.1, "s": "a b$c"}, "ident",
                                                                             [job_id])
    assert unit.jobs[0].env == {"K": "v"} and unit.jobs[0].args == ["--a=1"]
    with pytest.raises(NotFoundError, match="xcore list"):
        store.get_experiment(99)
    with pytest.raises((ValueError, sqlite3.IntegrityError)):  # a work unit id is recorded once, never twice
        store.add_work_unit(1, 1, "work_unit", {}, "", [new_job()])
    assert len(store.work_units(1)) == 1


def test_status_history_and_unit_status(store_url):
    store = open_url(store_url)
    exp = store.create_experiment("t")
    [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {"lr": 1}, "", [new_job("a"), new_job("b")])
    store.mark_launched([(a, "k", {"pid": 1}, "/log"), (b, "k", {"pid": 2}, None)])
    store.mark_launched([(a, "k", {"pid": 1}, "/log")])  # marking twice appends nothing
    store.record_states([(a, JobState(Status.RUNNING)), (b, JobState(Status.RUNNING))])
    store.record_states([(a, JobState(Status.RUNNING))])  # the same state again: no new event
    store.record_states([(a, JobState(Status.COMPLETED, "exit code 0", 0)), (b, JobState(Status.FAILED, "exit 3", 3))])
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


def test_add_jobs_and_active_jobs(store_url):
    store = open_url(store_url)
    exp = store.create_experiment("t")
    store.add_work_unit(exp.id, 1, "work_unit", {}, "", [])
    ids = store.add_jobs(exp.id, 1, [new_job("x"), new_job("y")])
    ids += store.add_work_unit(exp.id, 2, "auxiliary", {}, "", [new_job("z")])
    store.record_states([(ids[0], JobState(Status.COMPLETED, "", 0))])
    assert sorted(j.id for j in store.active_jobs([exp.id])) == ids[1:]
    assert [u.id for u in store.work_units(exp.id, [2])] == [2]
    assert store.get_experiment(exp.id).status_counts == {"LAUNCHING": 1}  # auxiliary units do not count


def test_list_filters_and_user(store_url):
    store = open_url(store_url)
    for title, tags, user in [("alpha sweep", ["x"], "ann"), ("beta", ["y"], "bob"), ("ALPHA two", ["x", "y"], "ann")]:
        store.create_experiment(title, tags=tags, user=user)
    assert [r.title for r in store.list_experiments(title="alpha")] == ["ALPHA two", "alpha sweep"]
    assert [r.id for r in store.list_experiments(tag="y")] == [3, 2]
    assert [r.id for r in store.list_experiments(user="ann")] == [3, 1]
    assert [r.id for r in store.list_experiments(user="ann", tag="y")] == [3]
    assert store.list_experiments(user="nobody") == []
    assert len(store.list_experiments(limit=1)) == 1
    assert [r.id for r in store.list_experiments(status="LAUNCHING", limit=None)] == [3, 2, 1]
    info = store.info()
    assert (info.schema_version, info.experiments, info.jobs) == (info.code_schema_version, 3, 0)
    assert "@" not in info.url or "<redacted>" in info.url


def _poll_same_states(url: str, job_ids: list[int], rounds: int) -> None:
    store = open_url(url)
    for _ in range(rounds):
        store.record_states([(j, JobState(Status.RUNNING, "running")) for j in job_ids])
    store.record_states([(j, JobState(Status.COMPLETED, "exit code 0", 0)) for j in job_ids])
    store.close()


def test_many_pollers_append_each_change_once(store_url):
    """4 processes record the same states of the same 20 jobs at once: one event per change."""
    store = open_url(store_url)
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


def _launcher(url: str, units: int, out: multiprocessing.Queue) -> None:
    store = open_url(url)
    exp = store.create_experiment("concurrent")
    job_ids = []
    for unit in range(1, units + 1):
        job_ids += store.add_work_unit(exp.id, unit, "work_unit", {"u": unit}, "", [new_job()])
        store.mark_launched([(job_ids[-1], "k", {"u": unit}, None)])
    out.put((exp.id, job_ids))
    store.close()


def test_concurrent_launchers_get_gap_free_ids(store_url):
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
    store = open_url(store_url)
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


def test_results_overwrite_by_name_and_the_last_recorded_wins(store_url):
    store = open_url(store_url)
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
    again = open_url(store_url)  # a new connection reads the same
    assert again.results(exp.id, [1]) == {1: {"loss": 0.25, "accuracy": 0.5, "odd": None}}


def test_links_overwrite_by_name(store_url):
    store = open_url(store_url)
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


def test_unit_summaries_match_the_folded_work_units(store_url):
    store = open_url(store_url)
    exp = store.create_experiment("summaries")
    [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {"lr": 0.1}, "", [new_job("a"), new_job("b")])
    [c] = store.add_work_unit(exp.id, 2, "auxiliary", {"x": "ü"}, "", [new_job("c")])
    store.add_work_unit(exp.id, 3, "work_unit", {}, "", [])  # no jobs: no start, no end
    store.mark_launched([(a, "k", {}, None), (b, "k", {}, None), (c, "k", {}, None)])
    store.record_states([(a, JobState(Status.RUNNING)), (b, JobState(Status.RUNNING)), (c, JobState(Status.RUNNING))])
    store.record_states([(a, JobState(Status.FAILED, "exit 2", 2)), (b, JobState(Status.FAILED, "exit 3", 3)),
                         (c, JobState(Status.COMPLETED, "done", 0))])
    summaries = store.unit_summaries(exp.id)
    assert summaries == MetadataStore.unit_summaries(store, exp.id)  # one query, the same answer
    assert [(s.id, s.status, s.message) for s in summaries] == [
        (1, Status.FAILED, "exit 2; exit 3"), (2, Status.COMPLETED, ""), (3, Status.LAUNCHING, "")]
    assert summaries[0].started_at is not None and summaries[0].ended_at is not None
    assert summaries[2].started_at is None and summaries[2].ended_at is None
