"""Per-unit cost of ``experiment.add`` at 100, 1,000 and 10,000 units, and the launcher's
peak memory at 10,000, on the fake backend (``xcore.testing.fake``; jobs are held, nothing runs).

The baselines, measured in the same process and alternated with xcore: the floor any
recording launcher pays with one transaction per add: one raw ``sqlite3`` row per unit and
per job (JSON args) into a throw-away database; the floor of xcore's own records, the same
rows xcore writes per add (unit, job, first event, tracker link) into its real schema and
indexes by plain sqlite3, one transaction per unit (what xcore did until adds were grouped);
and the same rows committed as xcore now commits them, by ``executemany`` in groups of
``XCORE_RECORD_GROUP`` (256) units: the physical floor of the grouped write. Both wall and
CPU time (process_time) are printed: on a loaded machine the CPU time is the cost itself.
Targets (issue 14): under 0.1 ms per add; linear in N (per-unit cost at 10,000 within 1.5x
of that at 100). Peak memory of a child process launching 10,000 held tasks end to end: under 60 MiB.

Run from a regular install: PYTHON bench/bench_add.py [REPEATS] [--profile]
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, load_average, temp_home, verdict  # noqa: E402

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 3
PROFILE = "--profile" in sys.argv
SIZES = (100, 1_000, 10_000)


def xcore_adds(n: int, profile: cProfile.Profile | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds for ``n`` adds until all are durable in the store (their group commits
    included, also those the recorder's thread makes while the script adds); the launch is excluded:
    it happens when the ``with`` block closes."""
    import xcore as xm
    from xcore.testing import fake, plugin_host

    plugin_host({"fake": fake})
    with xm.create_experiment("bench-add") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        executor = fake.FakeExecutor(hold=True)
        if profile:
            profile.enable()
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            experiment.add(xm.Job(exe, executor, args={"seed": i, "lr": 0.1}))
        experiment._launcher.recorder.flush()  # every add committed: what the raw baselines pay too
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        if profile:
            profile.disable()
    return seconds, cpu


def raw_sqlite(n: int) -> tuple[float, float]:
    """The floor: what recording ``n`` units and jobs costs in plain sqlite3."""
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(os.path.join(tmp, "raw.db"), isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("CREATE TABLE units (id INTEGER PRIMARY KEY, args TEXT)")
        db.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, unit INTEGER, args TEXT, status TEXT)")
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            args = {"seed": i, "lr": 0.1}
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO units (id, args) VALUES (?, ?)", (i, json.dumps(args)))
            db.execute("INSERT INTO jobs (unit, args, status) VALUES (?, ?, 'LAUNCHING')",
                       (i, json.dumps(["--seed", str(i), "--lr", "0.1"])))
            db.execute("COMMIT")
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        db.close()
    return seconds, cpu


def raw_schema(n: int) -> tuple[float, float]:
    """The physical floor of xcore's own records: the rows one add writes (unit, job with its
    executor and executable, first status event, tracker link) into xcore's schema and
    indexes, by plain sqlite3 statements, one transaction per unit, no Python objects."""
    from xcore.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "schema.db")
        SqliteStore(path).close()
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("INSERT INTO experiments (title, created_at) VALUES ('raw', 0)")
        executor, executable = _spec_rows(db)
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(1, n + 1):
            now = time.time()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO work_units (experiment_id, id, role, args, identity, created_at)"
                       " VALUES (1, ?, 'work_unit', ?, '', ?)", (i, json.dumps({"seed": i, "lr": 0.1}), now))
            job = db.execute(
                "INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor_spec, executable_spec,"
                " args, env, created_at, lease_id) VALUES (1, ?, 'true', 'fake.FakeExecutor', ?, ?, ?, '{}', ?, 1)",
                (i, executor, executable, json.dumps([f"--seed={i}", "--lr=0.1"]), now)).lastrowid
            db.execute("INSERT INTO job_events (job_id, status, at) VALUES (?, 'LAUNCHING', ?)", (job, now))
            db.execute("INSERT INTO job_links (job_id, experiment_id, work_unit_id, name, url)"
                       " VALUES (?, 1, ?, 'fake', ?)", (job, i, f"https://tracker.invalid/xcore-1/{i}"))
            db.execute("COMMIT")
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        db.close()
    return seconds, cpu


def _spec_rows(db: sqlite3.Connection) -> tuple[int, int]:
    """The ids of the one executor and one executable every raw job names (schema 5's ``job_specs``)."""
    from xcore.store.specs import digest

    bodies = (json.dumps({"hold": True, "requirements": {}}),
              json.dumps({"name": "true", "path": "true", "args": [], "env_vars": {}}))
    ids = [db.execute("INSERT INTO job_specs (digest, body) VALUES (?, ?)", (digest(b), b)).lastrowid for b in bodies]
    return int(ids[0] or 0), int(ids[1] or 0)


def raw_schema_grouped(n: int, group: int = 256) -> tuple[float, float]:
    """xcore's rows by plain sqlite3 as the grouped commit writes them: per group of units, one
    transaction of a few ``executemany`` (shared executor and executable JSON encoded once)."""
    from xcore.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "grouped.db")
        SqliteStore(path).close()
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("INSERT INTO experiments (title, created_at) VALUES ('raw', 0)")
        start, cpu = time.perf_counter(), time.process_time()
        executor, executable = _spec_rows(db)
        for first in range(1, n + 1, group):
            units = range(first, min(n + 1, first + group))
            now = time.time()
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT INTO work_units (experiment_id, id, role, args, identity, created_at)"
                           " VALUES (1, ?, 'work_unit', ?, '', ?)",
                           [(i, json.dumps({"seed": i, "lr": 0.1}), now) for i in units])
            db.executemany("INSERT INTO jobs (id, experiment_id, work_unit_id, name, executor_kind, executor_spec,"
                           " executable_spec, args, env, created_at, lease_id)"
                           " VALUES (?, 1, ?, 'true', 'fake.FakeExecutor', ?, ?, ?, '{}', ?, 1)",
                           [(i, i, executor, executable, json.dumps([f"--seed={i}", "--lr=0.1"]), now) for i in units])
            db.executemany("INSERT INTO job_events (job_id, status, at) VALUES (?, 'LAUNCHING', ?)",
                           [(i, now) for i in units])
            db.executemany("INSERT INTO job_links (job_id, experiment_id, work_unit_id, name, url)"
                           " VALUES (?, 1, ?, 'fake', ?)",
                           [(i, i, f"https://tracker.invalid/xcore-1/{i}") for i in units])
            db.execute("COMMIT")
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        db.close()
    return seconds, cpu


PEAK_SCRIPT = """
import sys
import xcore as xm
from xcore.testing import fake, plugin_host
plugin_host({"fake": fake})
with xm.create_experiment("bench-peak") as experiment:
    [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
    executor = fake.FakeExecutor(hold=True)
    for i in range(int(sys.argv[1])):
        experiment.add(xm.Job(exe, executor, args={"seed": i, "lr": 0.1}))
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def main() -> int:
    print(f"experiment.add, fake backend, median of {REPEATS} (cpu count {os.cpu_count()}, load average "
          f"{load_average()}); wall and CPU (this process's user+sys) time")
    per_unit: dict[int, float] = {}
    with temp_home():
        for n in SIZES:
            ours, raw, floor, grouped = [], [], [], []
            for _ in range(REPEATS):  # alternated, so load drift hits all four
                ours.append(xcore_adds(n))
                raw.append(raw_sqlite(n))
                floor.append(raw_schema(n))
                grouped.append(raw_schema_grouped(n))
            for what, index in (("wall", 0), ("cpu", 1)):
                xs = statistics.median(t[index] for t in ours)
                rs = statistics.median(t[index] for t in raw)
                fs = statistics.median(t[index] for t in floor)
                gs = statistics.median(t[index] for t in grouped)
                if what == "cpu":
                    per_unit[n] = xs / n * 1000
                print(f"  N={n:>6} {what:4s}: xcore {xs / n * 1000:.3f} ms/add  [{verdict(xs / n * 1000 < 0.1)}] "
                      f"target < 0.1 ms/add\n"
                      f"               raw sqlite3, a transaction per unit {rs / n * 1000:.3f} ms/unit (ratio "
                      f"{xs / rs:.2f}); xcore's rows, a transaction per unit {fs / n * 1000:.3f} (ratio "
                      f"{xs / fs:.2f}); xcore's rows, grouped executemany {gs / n * 1000:.3f} (ratio {xs / gs:.2f})")
        linear = per_unit[SIZES[-1]] / per_unit[SIZES[0]]
        print(f"  linearity (cpu): per-add at {SIZES[-1]} / at {SIZES[0]} = {linear:.2f}  "
              f"[{verdict(linear <= 1.5)}] target <= 1.5")
        if PROFILE:
            profile = cProfile.Profile()
            xcore_adds(10_000, profile)
            pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
        out = subprocess.run([PYTHON, "-c", PEAK_SCRIPT, "10000"], capture_output=True, text=True, check=True)
        peak = int(out.stdout.split()[-1]) / 1024
        hwm = 'print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))'
        base = subprocess.run([PYTHON, "-c", hwm], capture_output=True, text=True, check=True)
        print(f"  launcher peak RSS (VmHWM), 10,000 held tasks end to end: {peak:.1f} MiB (bare python "
              f"{int(base.stdout) / 1024:.1f} MiB)  [{verdict(peak < 60)}] target < 60 MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
