"""``xcore store copy``, ``xcore store info`` and ``xcore list --user/--mine`` on both stores."""

from __future__ import annotations

import getpass
import json

import attrs
from store_contract_helpers import new_job, open_url

from core_helpers import run_xcore
from xcore.model.status import Attempt, JobState, Status
from xcore.store.migrations import SCHEMA_VERSION


def _fill(url: str, titles: list[str]) -> None:
    store = open_url(url)
    for title in titles:
        exp = store.create_experiment(title, tags=["copy"], user="ann", host="laptop")
        [a] = store.add_work_unit(exp.id, 1, "work_unit", {"lr": 0.1, "name": "ü $x"}, "", [new_job("a")])
        [b, c] = store.add_work_unit(exp.id, 2, "work_unit", {"lr": 0.2}, "", [new_job("b"), new_job("c")])
        store.mark_launched([(a, "k", {"pid": 1}, "/log/a"), (b, "k", {"pid": 2}, None), (c, "k", {}, None)])
        store.record_states([(a, JobState(Status.COMPLETED, "exit code 0", 0)), (b, JobState(Status.FAILED, "x", 3))])
        store.record_states([(c, JobState(Status.RUNNING, "again", attempt=2, previous_attempts=(
            Attempt(1, Status.FAILED, "preempted", None, 1.0, 2.0, "preempted"),)))])  # attempts are copied too
        store.record_results(a, {"loss": 0.5, "nan": None}, final=True)
        store.record_results(b, {"loss": 0.25})  # not final: still pending after the copy
        store.record_links([(a, "wandb", "https://wandb.ai/x/ü?a=1&b"), (c, "tensorboard", "/tb/ $x")])
    store.close()


def _content(url: str) -> list[dict]:
    """Everything recorded, without the store-assigned ids (experiment and job ids)."""
    store = open_url(url)
    out = []
    for record in sorted(store.list_experiments(limit=None), key=lambda r: r.created_at):
        history = store.export_history(record.id)
        exp = attrs.asdict(record)
        exp.pop("id")
        units = []
        attempts = store.job_attempts(record.id)
        for unit in history.units:
            jobs = []
            for job in unit.jobs:
                data = attrs.asdict(job)
                data.pop("id"), data.pop("experiment_id")
                data["history"] = [(e.status, e.message, e.exit_code, e.at) for e in history.events[job.id]]
                if job.id in attempts:
                    data["attempts"] = {**attrs.asdict(attempts[job.id]), "job_id": None}
                jobs.append(data)
            units.append({"id": unit.id, "args": unit.args, "role": unit.role, "jobs": jobs})
        pending = {job.id: unit.id for unit in history.units for job in unit.jobs}
        out.append({"experiment": exp, "units": units, "origin": history.origin,
                    "results": store.results(record.id), "links": store.links(record.id),
                    "pending": [pending[j] for j in store.results_pending(record.id)]})
    store.close()
    return out


def test_copy_sqlite_to_postgres_and_back_idempotently(tmp_path, pg_url):
    sqlite_url = f"sqlite:///{tmp_path / 'mine.db'}"
    _fill(sqlite_url, ["first", "second"])
    first = run_xcore("store", "copy", sqlite_url, pg_url)
    assert first.returncode == 0, first.stderr
    assert "copied 2 experiments" in first.stdout and "0 renumbered" in first.stdout
    import psycopg

    password = psycopg.conninfo.conninfo_to_dict(pg_url)["password"]
    assert password not in first.stdout + first.stderr and "<redacted>" in first.stdout
    assert _content(pg_url) == _content(sqlite_url)
    assert _content(pg_url)[0]["results"] == {1: {"loss": 0.5, "nan": None}, 2: {"loss": 0.25}}
    assert _content(pg_url)[0]["links"][2] == {"tensorboard": "/tb/ $x"} and _content(pg_url)[0]["pending"] == [2]
    assert [r.id for r in open_url(pg_url).list_experiments()] == [2, 1]  # ids kept: they were free

    again = run_xcore("store", "copy", sqlite_url, pg_url)
    assert "copied 0 experiments" in again.stdout and "2 already there" in again.stdout
    assert open_url(pg_url).info().jobs == 6

    back = run_xcore("store", "copy", pg_url, sqlite_url)  # these came from there: nothing to do
    assert "copied 0 experiments" in back.stdout and "2 already there" in back.stdout

    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    _fill(other_url, ["someone else's"])
    to_other = run_xcore("store", "copy", pg_url, other_url)  # id 1 is taken there: renumbered
    assert "experiment 1 -> 2" in to_other.stdout and "experiment 2 -> 3" in to_other.stdout
    assert "copied 2 experiments" in to_other.stdout and "new job ids for 2 experiments" in to_other.stdout
    assert [c for c in _content(other_url) if c["experiment"]["title"] != "someone else's"] == _content(sqlite_url)
    chained = run_xcore("store", "copy", sqlite_url, other_url)  # same origins, reached another way
    assert "copied 0 experiments" in chained.stdout


def test_store_info_and_list_by_user(pg_url, tmp_path):
    store = open_url(pg_url)
    store.create_experiment("mine", user=getpass.getuser())
    store.create_experiment("theirs", user="someone-else")
    store.close()
    env = {"XCORE_STORE": pg_url}
    info = run_xcore("store", "info", env=env)
    assert info.returncode == 0, info.stderr
    assert "postgresql://xcore:<redacted>@127.0.0.1" in info.stdout
    assert f"schema version  {SCHEMA_VERSION} (this xcore: {SCHEMA_VERSION})" in info.stdout
    assert json.loads(run_xcore("store", "info", "--json", env=env).stdout)["experiments"] == 2
    mine = json.loads(run_xcore("list", "--mine", "--json", env=env).stdout)
    assert [r["title"] for r in mine] == ["mine"]
    theirs = json.loads(run_xcore("list", "--user", "someone-else", "--json", env=env).stdout)
    assert [r["title"] for r in theirs] == ["theirs"]
    assert run_xcore("list", "--user", "x", "--mine", env=env).returncode == 2  # one or the other
    sqlite_info = run_xcore("store", "info", f"sqlite:///{tmp_path / 'x.db'}")
    assert "backend         sqlite" in sqlite_info.stdout
    assert f"schema version  {SCHEMA_VERSION} (this xcore: {SCHEMA_VERSION})" in sqlite_info.stdout  # one numbering
