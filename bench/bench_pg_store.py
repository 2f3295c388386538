"""The PostgreSQL team store (issue 11), against the targets in the issue.

Figures (each part in a fresh schema of the test database, dropped afterwards):
  1. add_work_unit rate, one process, one transaction per unit (1 unit + 1 job + its first
     event): PostgresStore.add_work_unit against raw psycopg doing the same INSERTs, alternated
     ROUNDS times in the same run; medians and their ratio.
  2. PROCS concurrent launcher processes x PER_PROC work units, each its own experiment:
     total time; checks PROCS*PER_PROC recorded, experiment ids 1..PROCS, work unit ids
     1..PER_PROC in each, job ids unique, no writer error.
  3. `xcore list` and `xcore show EXP` (median of 5 fresh CLI processes) on a store holding
     BIG_EXPERIMENTS experiments of UNITS_PER_EXPERIMENT work units x 1 job (10,000 and
     1,000,000 by default), on PostgreSQL and on SQLite; target < 200 ms. `xcore --help` is
     shown as the floor any CLI process pays.

The server URL: XCORE_BENCH_PG_URL, else /var/lib/xcore-infra/postgres/url (written by
`scripts/infra/setup.sh postgres`). Run: python bench/bench_pg_store.py [--quick]
(--quick: 4 x 100 writers and a 1,000 x 100 store, for a smoke run).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, XCORE_BIN, temp_home, time_subprocess, verdict  # noqa: E402

QUICK = "--quick" in sys.argv
ROUNDS, N_RATE = 3, 500
PROCS, PER_PROC = (4, 100) if QUICK else (16, 500)
BIG_EXPERIMENTS, UNITS_PER_EXPERIMENT = (1_000, 100) if QUICK else (10_000, 100)
CLI_TARGET = 0.200

EXECUTOR = {"max_parallel": None, "cwd": None, "inherit_env": True, "docker_options": None, "kill_grace_secs": 5.0}
EXECUTABLE = {
    "name": "true", "command": ["/usr/bin/true"], "args": {"args": [], "kwargs": {}}, "env_vars": {}, "cwd": None,
}


def server_url() -> str:
    url = os.environ.get("XCORE_BENCH_PG_URL")
    if not url:
        try:
            url = Path("/var/lib/xcore-infra/postgres/url").read_text().strip()
        except OSError:
            raise SystemExit(
                "No PostgreSQL: run `sudo bash scripts/infra/setup.sh postgres` or set XCORE_BENCH_PG_URL"
            ) from None
    return url


class Schema:
    """A throw-away schema; ``url`` points the store at it."""

    def __init__(self, base: str) -> None:
        import psycopg

        self.base, self.name = base, "xb_" + uuid.uuid4().hex[:10]
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {self.name}")
        self.url = f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{self.name}"

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {self.name} CASCADE")


def new_job(i: int):
    from xcore.store.records import NewJob

    return NewJob(name="true", executor_kind="xlocal.Local", executor=EXECUTOR, executable=EXECUTABLE,
                  args=[f"--seed={i}"], env={})


# -- 1. rate against raw psycopg ----------------------------------------------------------------


def _spec_rows(db) -> tuple[int, int]:
    """The ids of EXECUTOR and EXECUTABLE in ``job_specs`` (schema 5: jobs name their specs), on
    a psycopg or a sqlite3 connection."""
    from xcore.store import specs

    mark = "?" if type(db).__module__ == "sqlite3" else "%s"
    ids = []
    for body in (json.dumps(EXECUTOR), json.dumps(EXECUTABLE)):
        db.execute(specs.insert_sql(mark), (specs.digest(body), body))
        ids.append(int(db.execute(specs.select_sql(mark), (specs.digest(body),)).fetchone()[0]))
    return ids[0], ids[1]


def rate_raw(url: str, n: int) -> float:
    import psycopg

    from xcore.store.postgres import PostgresStore

    store = PostgresStore(url)
    exp = store.create_experiment("raw").id
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        executor, executable = _spec_rows(conn)
        start = time.perf_counter()
        for i in range(1, n + 1):
            now = time.time()
            with conn.transaction():
                conn.execute("INSERT INTO work_units (experiment_id, id, role, args, identity, created_at)"
                             " VALUES (%s, %s, %s, %s, %s, %s)",
                             (exp, i, "work_unit", json.dumps({"seed": i}), "", now))
                job = conn.execute(
                    "INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor_spec,"
                    " executable_spec, args, env, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    (exp, i, "true", "xlocal.Local", executor, executable,
                     json.dumps([f"--seed={i}"]), "{}", now)).fetchone()[0]
                conn.execute("INSERT INTO job_events (job_id, status, at) VALUES (%s, 'LAUNCHING', %s)", (job, now))
        return time.perf_counter() - start


def rate_store(url: str, n: int) -> float:
    from xcore.store.postgres import PostgresStore

    store = PostgresStore(url)
    exp = store.create_experiment("store").id
    jobs = [new_job(i) for i in range(1, n + 1)]
    start = time.perf_counter()
    for i in range(1, n + 1):
        store.add_work_unit(exp, i, "work_unit", {"seed": i}, "", [jobs[i - 1]])
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


# -- 2. concurrent launchers --------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[4])
    from bench_pg_store import new_job
    from xcore.store.postgres import PostgresStore
    url, n, go = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    store = PostgresStore(url)
    jobs = [new_job(i) for i in range(1, n + 1)]
    while time.time() < go:
        time.sleep(0.001)
    t0 = time.time()
    exp = store.create_experiment("writer").id
    ids = []
    for i in range(1, n + 1):
        ids += store.add_work_unit(exp, i, "work_unit", {"seed": i}, "", [jobs[i - 1]])
    print(exp, t0, time.time(), store.retries, ",".join(map(str, ids)))
    """
)


def concurrent(url: str) -> dict:
    import psycopg

    from xcore.store.postgres import PostgresStore

    PostgresStore(url).close()  # the schema, before the writers race
    go = time.time() + 3.0  # every writer has started and connected by then
    here = os.path.dirname(os.path.abspath(__file__))
    procs = [subprocess.Popen([PYTHON, "-c", WRITER, url, str(PER_PROC), str(go), here],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(PROCS)]
    results, errors = [], []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            errors.append(err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}")
            continue
        exp, t0, t1, retries, ids = out.split()
        results.append((int(exp), float(t0), float(t1), int(retries), [int(i) for i in ids.split(",")]))
    with psycopg.connect(url) as conn:
        units = conn.execute("SELECT COUNT(*) FROM work_units").fetchone()[0]
        jobs = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        per_exp = dict(conn.execute("SELECT experiment_id, array_agg(id ORDER BY id) FROM work_units"
                                    " GROUP BY experiment_id").fetchall())
    gap_free = (sorted(per_exp) == list(range(1, PROCS + 1))
                and all(ids == list(range(1, PER_PROC + 1)) for ids in per_exp.values()))
    job_ids = [j for r in results for j in r[4]]
    return {
        "total": (max(r[2] for r in results) - min(r[1] for r in results)) if results else float("nan"),
        "units": units, "jobs": jobs, "gap_free": gap_free, "jobs_unique": len(job_ids) == len(set(job_ids)),
        "errors": errors, "retries": sum(r[3] for r in results),
    }


# -- 3. list and show on a big store ------------------------------------------------------------


def fill_postgres(url: str) -> int:
    import psycopg

    from xcore.store.postgres import PostgresStore

    PostgresStore(url).close()
    n, u = BIG_EXPERIMENTS, UNITS_PER_EXPERIMENT
    with psycopg.connect(url, autocommit=True) as conn:
        executor, executable = _spec_rows(conn)
        t0 = time.time() - 86400
        conn.execute("INSERT INTO experiments (id, title, tags, \"user\", host, created_at, launch_status)"
                     " SELECT g, 'bench ' || g, '[\"bench\"]', 'user' || (g %% 7), 'host', %s + g, 'LAUNCHED'"
                     " FROM generate_series(1, %s) g", (t0, n))
        conn.execute("INSERT INTO work_units (experiment_id, id, role, args, status, created_at)"
                     " SELECT e, w, 'work_unit', '{\"seed\": ' || w || '}', 'COMPLETED', %s + e"
                     " FROM generate_series(1, %s) e, generate_series(1, %s) w", (t0, n, u))
        conn.execute("INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor_spec,"
                     " executable_spec, args, env, status, message, exit_code, handle_kind, handle, log_path,"
                     " created_at, launched_at, started_at, ended_at)"
                     " SELECT experiment_id, id, 'true', 'xlocal.Local', %s, %s, '[\"--seed=' || id || '\"]', '{}',"
                     " 'COMPLETED', 'exit code 0', 0, 'xlocal.Process', '{\"pid\": 1}', '/tmp/log', created_at,"
                     " created_at, created_at, created_at + 1 FROM work_units ORDER BY experiment_id, id",
                     (executor, executable))
        conn.execute("INSERT INTO job_events (job_id, status, message, exit_code, at)"
                     " SELECT id, 'COMPLETED', 'exit code 0', 0, ended_at FROM jobs")
        conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), (SELECT MAX(id) FROM jobs))")
        conn.execute("ANALYZE")
        return conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def fill_sqlite(path: Path) -> int:
    import sqlite3

    from xcore.store.sqlite import SqliteStore

    SqliteStore(path).close()
    n, u = BIG_EXPERIMENTS, UNITS_PER_EXPERIMENT
    db = sqlite3.connect(path)
    t0 = time.time() - 86400
    db.execute("PRAGMA journal_mode = WAL")
    db.executemany("INSERT INTO experiments (id, title, tags, user, host, created_at, launch_status)"
                   " VALUES (?, ?, '[\"bench\"]', ?, 'host', ?, 'LAUNCHED')",
                   ((g, f"bench {g}", f"user{g % 7}", t0 + g) for g in range(1, n + 1)))
    db.executemany("INSERT INTO work_units (experiment_id, id, role, args, status, created_at)"
                   " VALUES (?, ?, 'work_unit', ?, 'COMPLETED', ?)",
                   ((e, w, f'{{"seed": {w}}}', t0 + e) for e in range(1, n + 1) for w in range(1, u + 1)))
    executor, executable = _spec_rows(db)
    db.execute("INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor_spec, executable_spec,"
               " args, env,"
               " status, message, exit_code, handle_kind, handle, log_path, created_at, launched_at, started_at,"
               " ended_at) SELECT experiment_id, id, 'true', 'xlocal.Local', ?, ?, '[\"--seed=' || id || '\"]', '{}',"
               " 'COMPLETED', 'exit code 0', 0, 'xlocal.Process', '{\"pid\": 1}', '/tmp/log', created_at, created_at,"
               " created_at, created_at + 1 FROM work_units ORDER BY experiment_id, id", (executor, executable))
    db.execute("INSERT INTO job_events (job_id, status, message, exit_code, at)"
               " SELECT id, 'COMPLETED', 'exit code 0', 0, ended_at FROM jobs")
    db.commit()
    db.execute("ANALYZE")
    count = db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    db.close()
    return count


def in_process(url: str) -> dict:
    """What list and show ask of the store, without the CLI process around it (median of 5)."""
    from xcore.hooks.host import PluginHost

    def median(fn) -> float:
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    host = PluginHost(load_entry_points=False)
    middle = BIG_EXPERIMENTS // 2
    opened = median(lambda: host.open_store(url).close())
    store = host.open_store(url)
    figures = {
        "open": opened,
        "list": median(lambda: store.list_experiments(limit=20)),
        "show": median(lambda: (store.get_experiment(middle), store.work_units(middle))),
    }
    store.close()
    return figures


def cli_times(url: str) -> dict:
    env = {**os.environ, "XCORE_STORE": url}
    middle = str(BIG_EXPERIMENTS // 2)
    run = [XCORE_BIN, "list"]
    time_subprocess(run, env)  # warm the page cache
    return {
        **{f"store_{k}": v for k, v in in_process(url).items()},
        "list": statistics.median(time_subprocess([XCORE_BIN, "list"], env) for _ in range(5)),
        "list_user": statistics.median(time_subprocess([XCORE_BIN, "list", "--user", "user3"], env) for _ in range(5)),
        "show": statistics.median(time_subprocess([XCORE_BIN, "show", middle], env) for _ in range(5)),
        "help": statistics.median(time_subprocess([XCORE_BIN, "--help"], env) for _ in range(5)),
    }


def main() -> int:
    base = server_url()
    from xcore.store.redaction import redact_url

    print(f"PostgreSQL team store, server {redact_url(base)}, cpu count {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f}{' (--quick)' if QUICK else ''}")
    with temp_home() as tmp:
        raw, ours = [], []
        for _ in range(ROUNDS):  # alternated, so both see the same machine load
            for sample, fn in ((raw, rate_raw), (ours, rate_store)):
                schema = Schema(base)
                try:
                    sample.append(fn(schema.url, N_RATE))
                finally:
                    schema.drop()
        raw_rate, our_rate = N_RATE / statistics.median(raw), N_RATE / statistics.median(ours)

        schema = Schema(base)
        try:
            conc = concurrent(schema.url)
        finally:
            schema.drop()

        schema = Schema(base)
        try:
            t = time.perf_counter()
            pg_jobs = fill_postgres(schema.url)
            pg_fill = time.perf_counter() - t
            pg_cli = cli_times(schema.url)
        finally:
            schema.drop()
        t = time.perf_counter()
        sqlite_path = tmp / "big.db"
        sqlite_jobs = fill_sqlite(sqlite_path)
        sqlite_fill = time.perf_counter() - t
        sqlite_cli = cli_times(f"sqlite:///{sqlite_path}")

    expected = PROCS * PER_PROC
    print(f"1. add_work_unit, one process, {N_RATE} units x 1 job, one transaction each, {ROUNDS} alternated rounds")
    raw_runs = ", ".join(f"{N_RATE / s:.0f}" for s in raw)
    our_runs = ", ".join(f"{N_RATE / s:.0f}" for s in ours)
    print(f"   raw psycopg (same INSERTs)     {raw_rate:8.0f} units/s  (runs: {raw_runs})")
    print(f"   PostgresStore.add_work_unit    {our_rate:8.0f} units/s  (runs: {our_runs})"
          f"  = {raw_rate / our_rate:.2f}x raw's time")
    print(f"2. {PROCS} launcher processes x {PER_PROC} work units at once: {conc['total']:.2f} s, "
          f"{conc['units'] / conc['total']:.0f} units/s; recorded {conc['units']}/{expected} units, "
          f"{conc['jobs']} jobs; ids gap-free: {conc['gap_free']}; job ids unique: {conc['jobs_unique']}; "
          f"writer errors: {len(conc['errors'])}; retries: {conc['retries']}")
    for error in conc["errors"][:3]:
        print(f"   writer error: {error}")
    print(f"3. {BIG_EXPERIMENTS} experiments x {UNITS_PER_EXPERIMENT} work units x 1 job "
          f"(PostgreSQL {pg_jobs} jobs, filled in {pg_fill:.0f} s; "
          f"SQLite {sqlite_jobs} jobs, filled in {sqlite_fill:.0f} s)")
    for name, cli in (("PostgreSQL", pg_cli), ("SQLite", sqlite_cli)):
        print(f"   {name:<10} `xcore list` {cli['list'] * 1e3:6.0f} ms"
              f"   `xcore list --user U` {cli['list_user'] * 1e3:6.0f} ms"
              f"   `xcore show {BIG_EXPERIMENTS // 2}` {cli['show'] * 1e3:6.0f} ms"
              f"   (`xcore --help` {cli['help'] * 1e3:4.0f} ms)")
        print(f"   {'':<10} in-process: open {cli['store_open'] * 1e3:.1f} ms, list_experiments(limit=20) "
              f"{cli['store_list'] * 1e3:.1f} ms, get_experiment + work_units ({UNITS_PER_EXPERIMENT} units) "
              f"{cli['store_show'] * 1e3:.1f} ms")
    print()
    ok = conc["units"] == conc["jobs"] == expected and conc["gap_free"] and conc["jobs_unique"] and not conc["errors"]
    print(f"[{verdict(ok)}] {PROCS} x {PER_PROC} concurrent: {conc['units']} of {expected} recorded, "
          "ids gap-free, no errors")
    for name, cli in (("PostgreSQL", pg_cli), ("SQLite", sqlite_cli)):
        print(f"[{verdict(cli['list'] < CLI_TARGET)}] {name} `xcore list` {cli['list'] * 1e3:.0f} ms (< 200 ms)")
        print(f"[{verdict(cli['show'] < CLI_TARGET)}] {name} `xcore show` {cli['show'] * 1e3:.0f} ms (< 200 ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
