"""Faults on the real PostgreSQL server: a wrong password, a dropped connection, a commit whose
reply is lost, and the server restarted while launchers write. Each counts what was submitted,
recorded and lost."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from xcore.testing import infra_required

if not infra_required():
    pytest.importorskip("psycopg", reason="pip install 'xcore[postgres]' to run the PostgreSQL fault tests")
import psycopg
from pg_helpers import admin_sql, restart_server, with_password
from store_contract_helpers import new_job, open_url

from core_helpers import run_xcore
from xcore.errors import ConfigurationError
from xcore.model.status import JobState, Status
from xcore.store.postgres import PostgresStore

WRONG = "Wr0ng-pa$$word-42"


def test_wrong_password_is_a_clear_error_without_the_password(pg_url):
    url = with_password(pg_url, WRONG)
    start = time.monotonic()
    with pytest.raises(ConfigurationError) as caught:
        open_url(url)
    assert time.monotonic() - start < 10  # not retried: a wrong password does not heal
    message = str(caught.value)
    assert "password authentication failed" in message and "<redacted>" in message
    assert WRONG not in message and "~/.pgpass" in message
    result = run_xcore("list", env={"XCORE_STORE": url})
    assert result.returncode == 1
    assert result.stderr.startswith("error: The metadata store postgresql://xcore:<redacted>@")
    assert len(result.stderr.strip().splitlines()) == 1
    assert WRONG not in result.stdout + result.stderr
    info = run_xcore("store", "info", url)
    assert info.returncode == 1 and WRONG not in info.stdout + info.stderr


def test_dropped_connection_is_retried(pg_url):
    store = open_url(pg_url)
    assert isinstance(store, PostgresStore)
    exp = store.create_experiment("t")
    [job] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job()])
    assert store._conn is not None
    pid = store._conn.info.backend_pid
    assert admin_sql("SELECT pg_terminate_backend(%s)", pid) == [(True,)]
    store.add_work_unit(exp.id, 2, "work_unit", {}, "", [new_job()])  # reconnects and writes once
    assert store.retries >= 1 and store._conn.info.backend_pid != pid
    admin_sql("SELECT pg_terminate_backend(%s)", store._conn.info.backend_pid)
    store.record_states([(job, JobState(Status.RUNNING))])
    assert [u.id for u in store.work_units(exp.id)] == [1, 2]
    assert [e.status for e in store.job_history(job)] == [Status.LAUNCHING, Status.RUNNING]


class LostReplyStore(PostgresStore):
    """Each write commits, then behaves as if the connection dropped before the reply came:
    the store must run its retry, which finds the commit and records nothing twice."""

    def _transaction(self, work):  # type: ignore[no-untyped-def]
        first = super()._transaction(work)
        if getattr(self, "_losing", False):
            second = super()._transaction(lambda cur, _retrying: work(cur, True))
            assert second == first, "a retried write must return what the lost commit returned"
        return first


def test_commit_with_a_lost_reply_is_not_recorded_twice(pg_url):
    store = LostReplyStore(pg_url)
    store._losing = True
    exp = store.create_experiment("lost replies", user="ann", host="h")
    job_ids = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a"), new_job("b")])
    more = store.add_jobs(exp.id, 1, [new_job("c")])
    store.mark_launched([(j, "k", {"j": j}, None) for j in job_ids + more])
    store.record_states([(j, JobState(Status.RUNNING)) for j in job_ids + more])
    store.update_experiment(exp.id, notes="n")
    store._losing = False
    info = store.info()
    assert (info.experiments, info.work_units, info.jobs) == (1, 1, 3)
    for job_id in job_ids + more:
        assert [e.status for e in store.job_history(job_id)] == [Status.LAUNCHING, Status.PENDING, Status.RUNNING]


def test_lease_writes_with_a_lost_reply_are_not_recorded_twice(pg_url):
    """Every lease write retried after its commit: one lease, one claim, one event per change."""
    store = LostReplyStore(pg_url)
    store._losing = True
    exp = store.create_experiment("lost replies, leased")
    lease = store.open_lease(exp.id, "h", 7, 1.0)
    store.heartbeat(lease)
    [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {}, "u1", [new_job("a"), new_job("b")], lease_id=lease)
    [c] = store.add_work_unit(exp.id, 2, "work_unit", {}, "u2", [new_job("c")], lease_id=lease)
    intent = store.begin_intent(lease, "k", [a])
    store.mark_launched([(a, "k", {"a": 1}, None)], intent_id=intent)
    intent = store.begin_intent(lease, "k", [b])
    store.record_states([(b, JobState(Status.FAILED, "failed to launch: refused"))], intent_id=intent)
    store.begin_intent(lease, "k", [c])  # in flight when the launcher dies
    [stale] = store.leases()
    assert store.claim_lease(stale, "resolver", 8, 2.0)
    store.resolve_lease(lease, [(c, "k", {"c": 1}, None)], [], "")
    again = store.open_lease(exp.id, "h", 9, 3.0)
    [b2] = store.add_jobs(exp.id, 1, [new_job("b")], lease_id=again, replace_unlaunched=True)
    store.close_lease(again)
    store._losing = False
    assert store.leases() == []
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM launch_intents").fetchone() == (0,)
    assert [[j.id for j in u.jobs] for u in store.work_units(exp.id)] == [[a, b2], [c]]
    assert [e.status for e in store.job_history(c)] == [Status.LAUNCHING, Status.PENDING]
    assert [e.status for e in store.job_history(b2)] == [Status.LAUNCHING]
    assert store.info().jobs == 3


def test_results_and_links_with_a_lost_reply_are_recorded_once(pg_url):
    store = LostReplyStore(pg_url)
    exp = store.create_experiment("lost result replies")
    [a, b] = store.add_work_unit(exp.id, 1, "work_unit", {}, "", [new_job("a"), new_job("b")])
    store.mark_launched([(a, "k", {}, None), (b, "k", {}, None)])
    store.record_states([(a, JobState(Status.COMPLETED, "", 0)), (b, JobState(Status.COMPLETED, "", 0))])
    store._losing = True  # every write below commits, then runs again as a retry
    store.record_results(a, {"loss": 0.5, "accuracy": 0.75}, final=True)
    store.record_results(b, {"loss": 0.25})
    store.record_links([(a, "wandb", "https://wandb.ai/a"), (b, "wandb", "https://wandb.ai/b")])
    store._losing = False
    rows = admin_sql(f"SELECT (SELECT COUNT(*) FROM {_schema(pg_url)}.job_results),"
                     f" (SELECT COUNT(*) FROM {_schema(pg_url)}.job_links)")
    assert rows == [(3, 2)]  # recorded once each, although each write ran twice
    assert store.results(exp.id) == {1: {"loss": 0.25, "accuracy": 0.75}}
    assert store.results_pending(exp.id) == [b] and store.links(exp.id) == {1: {"wandb": "https://wandb.ai/b"}}


def _schema(url: str) -> str:
    return url.rsplit("search_path%3D", 1)[1]


def _writer(url: str, units: int, submitted_path: str, out: multiprocessing.Queue) -> None:
    """A launcher: record a work unit, submit it (to a file standing in for the backend), record
    the handle. A failure is reported, never hidden."""
    store = open_url(url)
    assert isinstance(store, PostgresStore)
    try:
        exp = store.create_experiment(f"writer {submitted_path}")
        with open(submitted_path, "a") as submitted:
            for unit in range(1, units + 1):
                [job] = store.add_work_unit(exp.id, unit, "work_unit", {"u": unit}, "", [new_job()])
                submitted.write(f"{job}\n")
                submitted.flush()
                store.mark_launched([(job, "fake", {"n": unit}, None)])
                time.sleep(0.005)
        out.put((exp.id, store.retries, None))
    except Exception as exc:  # noqa: BLE001  (any failure is reported to the test)
        out.put((None, store.retries, f"{type(exc).__name__}: {exc}"))


def test_server_restart_while_launchers_write(pg_url, tmp_path):
    units, writers = 150, 3
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    files = [tmp_path / f"submitted-{i}" for i in range(writers)]
    procs = [ctx.Process(target=_writer, args=(pg_url, units, str(f), out)) for f in files]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + 120
    while not all(f.exists() and len(f.read_text().splitlines()) >= 20 for f in files):
        assert time.monotonic() < deadline, "writers did not start"
        time.sleep(0.05)
    restart_server()
    results = [out.get(timeout=300) for _ in procs]
    for proc in procs:
        proc.join(60)
    assert [error for _, _, error in results] == [None] * writers
    assert sum(retries for _, retries, _ in results) >= writers  # the restart cut every writer
    store = open_url(pg_url)
    for exp, _, _ in results:
        units_recorded = store.work_units(exp)
        assert [u.id for u in units_recorded] == list(range(1, units + 1))  # nothing lost, nothing twice
        assert all(len(u.jobs) == 1 for u in units_recorded)
    submitted = [int(line) for f in files for line in Path(f).read_text().splitlines()]
    assert len(submitted) == len(set(submitted)) == units * writers
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT id, status, handle FROM jobs WHERE id = ANY(%s)", (submitted,)).fetchall()
        assert len(rows) == units * writers and all(s == "PENDING" and h for _, s, h in rows)
        doubled = conn.execute("SELECT job_id, status, COUNT(*) FROM job_events GROUP BY job_id, status"
                               " HAVING COUNT(*) > 1").fetchall()
        assert doubled == []
        assert conn.execute("SELECT COUNT(*) FROM job_events").fetchone()[0] == 2 * units * writers


def test_password_from_pgpass_or_pgpassword_and_tls_options_pass_through(pg_url, tmp_path, monkeypatch):
    import re

    info = psycopg.conninfo.conninfo_to_dict(pg_url)
    bare = re.sub(r"://([^:/@]*):[^@]*@", r"://\1@", pg_url, count=1)  # no password in the URL
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"{info['host']}:{info['port']}:{info['dbname']}:{info['user']}:{info['password']}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    open_url(bare).create_experiment("via pgpass")
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    monkeypatch.setenv("PGPASSWORD", info["password"])
    assert [r.title for r in open_url(bare).list_experiments()] == ["via pgpass"]
    # TLS settings reach libpq: this loopback server has no TLS, so requiring it is refused
    with pytest.raises(ConfigurationError, match="SSL"):
        open_url(f"{pg_url}&sslmode=require")


def test_unreachable_server_fails_clearly_after_the_retry_deadline(monkeypatch):
    from xcore.store.postgres import StoreUnavailableError

    monkeypatch.setenv("XCORE_STORE_RETRY_SECS", "1")
    start = time.monotonic()
    with pytest.raises(StoreUnavailableError, match=r"Connection refused. Is the server up\? \(retried for 1 s"):
        open_url("postgresql://ann:s3cret@127.0.0.1:1/x")
    assert 0.5 < time.monotonic() - start < 10  # retried (backing off) until the deadline, not forever
    result = run_xcore("list", env={"XCORE_STORE": "postgresql://ann:s3cret@127.0.0.1:1/x",
                                    "XCORE_STORE_RETRY_SECS": "0"})
    assert result.returncode == 1 and "s3cret" not in result.stderr and "Is the server up?" in result.stderr
