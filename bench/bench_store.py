"""Metadata store throughput (SQLite): writes, state updates, reads, and concurrent writers.

Figures (all in a temporary XCORE_HOME):
  1. work units recorded per second by one process, each with one job:
     a. raw sqlite3 baseline: the same 3 INSERTs per unit, one transaction per unit, same pragmas
     b. SqliteStore.add_work_unit
     c. Experiment.add (prepare + serialize + store), with the launcher's submit stubbed out
  2. SqliteStore.record_states for 1,000 jobs in one call (RUNNING, then COMPLETED)
  3. reads with one experiment of 10,000 work units (+ 20 small experiments):
     SqliteStore.list_experiments / get_experiment / work_units in-process, and
     `xcore list` / `xcore show EXP` through the CLI (median of 5 subprocess runs)
  4. 8 processes x 500 work units each at once, each process its own experiment: total
     time, aggregate rate against the single-process rate, and a check that all 4,000
     work units and 4,000 jobs are there.

There is no numeric target in the issue for these; the checks printed as PASS/MISS are
correctness (nothing lost) and the store's overhead against raw sqlite3 (<= 2x).

Run: .venv/bin/python bench/bench_store.py
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, XCORE_BIN, temp_home, time_subprocess, verdict  # noqa: E402

N_SINGLE = 2000
N_STATES = 1000
N_BIG = 10_000
PROCS, PER_PROC = 8, 500

EXECUTOR = {"max_parallel": None, "cwd": None, "inherit_env": True, "docker_options": None, "kill_grace_secs": 5.0}
EXECUTABLE = {
    "name": "true", "command": ["/usr/bin/true"], "args": {"args": [], "kwargs": {}}, "env_vars": {}, "cwd": None,
}


def new_job(i: int):
    from xcore.store.records import NewJob

    return NewJob(name="true", executor_kind="xlocal.Local", executor=EXECUTOR, executable=EXECUTABLE,
                  args=[f"--seed={i}"], env={})


def bench_raw_sqlite(path: Path, n: int) -> float:
    """Baseline: what SqliteStore.add_work_unit does, minus the Python layer."""
    from xcore.store.specs import digest
    from xcore.store.sqlite import SqliteStore

    SqliteStore(path).close()  # create the schema
    db = sqlite3.connect(path, timeout=120, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("INSERT INTO experiments (title, created_at) VALUES ('raw', 0)")
    exp = db.execute("SELECT max(id) FROM experiments").fetchone()[0]
    specs = [db.execute("INSERT INTO job_specs (digest, body) VALUES (?, ?)", (digest(body), body)).lastrowid
             for body in (json.dumps(EXECUTOR), json.dumps(EXECUTABLE))]  # shared by every job (schema 5)
    start = time.perf_counter()
    for i in range(1, n + 1):
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO work_units (experiment_id, id, role, args, identity, created_at) VALUES (?,?,?,?,?,?)",
                   (exp, i, "work_unit", json.dumps({"seed": i}), "", now))
        cur = db.execute(
            "INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor_spec, executable_spec, args,"
            " env, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
            (exp, i, "true", "xlocal.Local", *specs, json.dumps([f"--seed={i}"]), "{}", now))
        db.execute("INSERT INTO job_events (job_id, status, at) VALUES (?, 'LAUNCHING', ?)", (cur.lastrowid, now))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    return elapsed


def bench_store_add(path: Path, n: int) -> tuple[float, object, int, list[int]]:
    from xcore.store.sqlite import SqliteStore

    store = SqliteStore(path)
    exp = store.create_experiment("store-add").id
    jobs = [new_job(i) for i in range(1, n + 1)]
    job_ids: list[int] = []
    start = time.perf_counter()
    for i in range(1, n + 1):
        job_ids += store.add_work_unit(exp, i, "work_unit", {"seed": i}, "", [jobs[i - 1]])
    return time.perf_counter() - start, store, exp, job_ids


def bench_experiment_add(n: int) -> float:
    import xcore as xm
    import xlocal

    with xm.create_experiment("experiment-add") as experiment:
        experiment._launcher.submit = lambda jobs: None  # record only: nothing is launched
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), "/bin/true")])
        executor = xlocal.Local()
        start = time.perf_counter()
        for i in range(n):
            experiment.add(xm.Job(exe, executor, args={"seed": i}))
        elapsed = time.perf_counter() - start
    return elapsed


def bench_record_states(store, job_ids: list[int]) -> tuple[float, float]:
    from xcore.model.status import JobState, Status

    now = time.time()
    running = [(j, JobState(Status.RUNNING, "pid 1", started_at=now)) for j in job_ids]
    done = [(j, JobState(Status.COMPLETED, "exit code 0", 0, now, now + 1)) for j in job_ids]
    t0 = time.perf_counter()
    store.record_states(running)
    t1 = time.perf_counter()
    store.record_states(done)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


WRITER = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, sys.argv[4])
    from bench_store import new_job
    from xcore.store.sqlite import SqliteStore
    path, n, go = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    store = SqliteStore(path)
    exp = store.create_experiment(f"writer-{os.getpid()}").id
    while time.time() < go:
        time.sleep(0.001)
    t0 = time.time()
    for i in range(1, n + 1):
        store.add_work_unit(exp, i, "work_unit", {"seed": i}, "", [new_job(i)])
    print(exp, t0, time.time())
    """
)


def bench_concurrent(path: Path) -> dict[str, float]:
    from xcore.store.sqlite import SqliteStore

    SqliteStore(path).close()
    go = time.time() + 1.5  # every writer has opened the store and waits for this moment
    pythonpath = os.pathsep.join(filter(None, [os.path.dirname(__file__), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath}
    here = os.path.dirname(os.path.abspath(__file__))
    procs = [
        subprocess.Popen([PYTHON, "-c", WRITER, str(path), str(PER_PROC), str(go), here],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(PROCS)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"writer failed:\n{err}")
        exp, t0, t1 = out.split()
        results.append((int(exp), float(t0), float(t1)))
    first = min(r[1] for r in results)
    last = max(r[2] for r in results)
    db = sqlite3.connect(path)
    ids = [r[0] for r in results]
    marks = ",".join("?" * len(ids))
    units = db.execute(f"SELECT COUNT(*) FROM work_units WHERE experiment_id IN ({marks})", ids).fetchone()[0]
    jobs = db.execute(f"SELECT COUNT(*) FROM jobs WHERE experiment_id IN ({marks})", ids).fetchone()[0]
    per_exp = [db.execute("SELECT COUNT(*) FROM work_units WHERE experiment_id = ?", (e,)).fetchone()[0] for e in ids]
    db.close()
    return {"total": last - first, "units": units, "jobs": jobs, "per_exp_ok": all(c == PER_PROC for c in per_exp),
            "slowest_writer": max(r[2] - r[1] for r in results)}


def bench_reads(home: Path) -> dict[str, float]:
    from xcore.model.status import JobState, Status
    from xcore.store.sqlite import SqliteStore

    path = home / "xcore.db"
    store = SqliteStore(path)
    for k in range(20):
        exp = store.create_experiment(f"small-{k}").id
        ids = [store.add_work_unit(exp, i, "work_unit", {"seed": i}, "", [new_job(i)])[0] for i in range(1, 6)]
        store.record_states([(j, JobState(Status.COMPLETED, "exit code 0", 0)) for j in ids])
    big = store.create_experiment("big-10k").id
    t0 = time.perf_counter()
    ids = [store.add_work_unit(big, i, "work_unit", {"seed": i}, "", [new_job(i)])[0] for i in range(1, N_BIG + 1)]
    t1 = time.perf_counter()
    store.record_states([(j, JobState(Status.COMPLETED, "exit code 0", 0)) for j in ids])
    t2 = time.perf_counter()
    figures = {"fill_10k": t1 - t0, "record_states_10k": t2 - t1}

    def best(fn, n=5):
        samples = []
        for _ in range(n):
            s = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - s)
        return statistics.median(samples)

    figures["list_experiments"] = best(lambda: store.list_experiments(limit=20))
    figures["get_experiment"] = best(lambda: store.get_experiment(big))
    figures["work_units_10k"] = best(lambda: store.work_units(big))
    figures["work_units_one"] = best(lambda: store.work_units(big, [N_BIG // 2]))
    store.close()
    env = dict(os.environ)
    figures["cli_list"] = statistics.median(time_subprocess([XCORE_BIN, "list"], env) for _ in range(5))
    figures["cli_show"] = statistics.median(time_subprocess([XCORE_BIN, "show", str(big)], env) for _ in range(5))
    figures["cli_show_json"] = statistics.median(
        time_subprocess([XCORE_BIN, "show", str(big), "--json"], env) for _ in range(3))
    figures["cli_help"] = statistics.median(time_subprocess([XCORE_BIN, "--help"], env) for _ in range(5))
    return figures


def main() -> int:
    with temp_home() as tmp:
        home = Path(os.environ["XCORE_HOME"])
        home.mkdir(parents=True)

        raw = bench_raw_sqlite(tmp / "raw.db", N_SINGLE)
        store_add, store, _exp, job_ids = bench_store_add(tmp / "store.db", N_SINGLE)
        exp_add = bench_experiment_add(N_SINGLE)
        running, completed = bench_record_states(store, job_ids[:N_STATES])
        store.close()
        concurrent = bench_concurrent(tmp / "concurrent.db")
        reads = bench_reads(home)

    single_rate = N_SINGLE / store_add
    print(f"store throughput (SQLite WAL), cpu count {os.cpu_count()}")
    print(f"1. one process, {N_SINGLE} work units x 1 job, one transaction per unit")
    print(f"   raw sqlite3 baseline          {N_SINGLE / raw:8.0f} units/s  ({raw / N_SINGLE * 1e3:.3f} ms/unit)")
    print(f"   SqliteStore.add_work_unit     {single_rate:8.0f} units/s  ({store_add / N_SINGLE * 1e3:.3f} ms/unit)"
          f"  {store_add / raw:.2f}x raw")
    print(f"   Experiment.add (no launch)    {N_SINGLE / exp_add:8.0f} units/s"
          f"  ({exp_add / N_SINGLE * 1e3:.3f} ms/unit)"
          f"  {exp_add / raw:.2f}x raw")
    print(f"2. record_states, {N_STATES} jobs in one call: RUNNING {running * 1e3:.1f} ms"
          f" ({N_STATES / running:.0f} jobs/s), COMPLETED {completed * 1e3:.1f} ms ({N_STATES / completed:.0f} jobs/s)")
    print(f"3. reads, one experiment of {N_BIG} work units (+20 small experiments)")
    print(f"   fill: add_work_unit x {N_BIG} {reads['fill_10k']:.2f} s,"
          f" record_states x {N_BIG} {reads['record_states_10k']:.2f} s")
    print(f"   list_experiments(limit=20)    {reads['list_experiments'] * 1e3:8.1f} ms")
    print(f"   get_experiment(big)           {reads['get_experiment'] * 1e3:8.1f} ms")
    print(f"   work_units(big) all 10k       {reads['work_units_10k'] * 1e3:8.1f} ms")
    print(f"   work_units(big, [one])        {reads['work_units_one'] * 1e3:8.1f} ms")
    print(f"   `xcore list`                  {reads['cli_list'] * 1e3:8.1f} ms"
          f"   (`xcore --help` {reads['cli_help'] * 1e3:.1f} ms)")
    print(f"   `xcore show big`              {reads['cli_show'] * 1e3:8.1f} ms")
    print(f"   `xcore show big --json`       {reads['cli_show_json'] * 1e3:8.1f} ms")
    agg_rate = concurrent["units"] / concurrent["total"]
    print(f"4. {PROCS} processes x {PER_PROC} work units at once: {concurrent['total']:.2f} s total "
          f"(slowest writer {concurrent['slowest_writer']:.2f} s), {agg_rate:.0f} units/s aggregate = "
          f"{agg_rate / single_rate:.2f}x the single-process rate")
    print(f"   rows: {concurrent['units']} work units, {concurrent['jobs']} jobs (expected {PROCS * PER_PROC} each)")
    print()
    lost_ok = concurrent["units"] == concurrent["jobs"] == PROCS * PER_PROC and concurrent["per_exp_ok"]
    print(f"[{verdict(lost_ok)}] concurrent writers: nothing lost ({concurrent['units']}/{PROCS * PER_PROC} units)")
    print(f"[{verdict(store_add / raw <= 2)}] SqliteStore.add_work_unit overhead {store_add / raw:.2f}x raw sqlite3"
          " (<= 2x)")
    return 0 if lost_ok else 1


if __name__ == "__main__":
    sys.exit(main())
