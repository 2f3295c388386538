"""What a 10,000-task sweep's rows cost the SQLite store: ``record_adds`` (groups of 256 units,
the Recorder's group commits) and ``mark_launched`` (one transaction moving every job from
LAUNCHING to PENDING with its handle), and the store's size afterwards, for the installed xcore.

All jobs share one Slurm-like executor (~370 bytes of JSON) and one executable (~230 bytes).
Until schema version 4 every job row carried both texts; since version 5 it names them by id
(``job_specs``, xcore.store.specs). With ``--against PYTHON`` the same measurement runs in
another install too (e.g. a venv holding the schema-4 release), alternated run by run in the
same session, and the ratio of the medians is printed. Each measurement is a fresh child
process; wall and CPU (user+system of the measured calls) are printed, CPU being the cost itself
on a loaded machine. ``--postgres`` measures the PostgreSQL store instead (a throw-away schema
per run on the server of bench_pg_store.py; its size is that of the jobs and job_specs tables).

Run from a regular install: PYTHON bench/bench_store_rows.py [N] [--repeats R] [--against PYTHON] [--postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, load_average, temp_home  # noqa: E402

CHILD = textwrap.dedent(r"""
    import json, os, sys, tempfile, time
    from xcore.store.records import NewJob, UnitWrite
    from xcore.store.sqlite import SqliteStore

    n, group, url = int(sys.argv[1]), int(sys.argv[2]), (sys.argv[3:] or [None])[0]
    executor = {"kind": "xhpc.Slurm", "cluster": {"name": "hpc", "host": "login.cluster.invalid", "port": 22,
                "user": "xcore", "scheduler": "slurm", "scratch": "/home/xcore/xcore-scratch"},
                "partition": "debug", "time": "01:00:00", "account": None, "qos": None, "hold": True,
                "requirements": {"cpu": 1, "memory": "1G", "gpu": 0}, "modules": [], "setup": [],
                "directives": [], "env": {}, "max_array_size": None}
    executable = {"name": "train", "path": "/home/xcore/project/train.py", "entrypoint": "python",
                  "args": ["--epochs", "3"], "env_vars": {"PYTHONUNBUFFERED": "1"}, "workdir": "/home/xcore/project",
                  "package": "sha256:" + "0" * 64}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.db")
        if url:
            from xcore.store.postgres import PostgresStore
            store = PostgresStore(url, migrate=True)
        else:
            store = SqliteStore(path)
        exp = store.create_experiment("rows").id
        lease = store.open_lease(exp, "bench", os.getpid(), None)
        writes = [UnitWrite(exp, u, "work_unit", {"seed": u, "lr": 0.1}, "",
                            [NewJob("train", "xhpc.Slurm", executor, executable, [f"--seed={u}", "--lr=0.1"], {})])
                  for u in range(1, n + 1)]
        ids = []
        wall = cpu = 0.0
        for first in range(0, n, group):
            t, c = time.perf_counter(), time.process_time()
            ids += [i for unit in store.record_adds(writes[first:first + group], lease_id=lease) for i in unit]
            wall, cpu = wall + time.perf_counter() - t, cpu + time.process_time() - c
        run_dir = "/home/xcore/xcore-scratch/runs/exp-1/0123456789abcdef"
        launched = [(job_id, "xhpc.SlurmHandle", {"cluster": "hpc", "job_id": "4242", "task": i, "index": i,
                     "run_dir": run_dir, "chunk": 0}, f"{run_dir}/logs/{i}.out") for i, job_id in enumerate(ids)]
        t, c = time.perf_counter(), time.process_time()
        store.mark_launched(launched)
        mark_wall, mark_cpu = time.perf_counter() - t, time.process_time() - c
        version = store.info().schema_version
        store.close()  # checkpoints the WAL into the file
        if url:
            import psycopg
            with psycopg.connect(url) as conn:
                size = conn.execute("SELECT pg_total_relation_size('jobs')"
                                    " + COALESCE(pg_total_relation_size(to_regclass('job_specs')), 0)").fetchone()[0]
        else:
            size = sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))
        print(json.dumps({"schema": version, "adds_wall": wall, "adds_cpu": cpu, "mark_wall": mark_wall,
                          "mark_cpu": mark_cpu, "bytes": size,
                          "executor_bytes": len(json.dumps(executor)),
                          "executable_bytes": len(json.dumps(executable))}))
""")


def measure(python: str, n: int, group: int, postgres: bool) -> dict[str, float]:
    schema = None
    if postgres:
        from bench_pg_store import Schema, server_url

        schema = Schema(server_url())
    try:
        out = subprocess.run([python, "-c", CHILD, str(n), str(group), *([schema.url] if schema else [])],
                             check=True, capture_output=True, text=True, timeout=600).stdout
    finally:
        if schema is not None:
            schema.drop()
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--group", type=int, default=256, help="units per record_adds call (the Recorder's group)")
    parser.add_argument("--against", help="another install's python, measured alternately as the baseline")
    parser.add_argument("--postgres", action="store_true",
                        help="measure the PostgreSQL store (psycopg in each install)")
    options = parser.parse_args()
    pythons = {"this": PYTHON} | ({"against": options.against} if options.against else {})
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in pythons}
    with temp_home("xcore-bench-rows-"):
        for python in pythons.values():
            measure(python, min(options.n, 500), options.group, options.postgres)  # warm the page cache and .pyc files
        for _ in range(options.repeats):
            for name, python in pythons.items():
                samples[name].append(measure(python, options.n, options.group, options.postgres))
    kind = "PostgreSQL" if options.postgres else "SQLite"
    print(f"{kind} store rows: {options.n} jobs of one executor, record_adds in groups of {options.group},"
          f" one mark_launched; medians of {options.repeats}, load average {load_average()}")
    first = samples["this"][0]
    print(f"  spec JSON per job: executor {first['executor_bytes']} B, executable {first['executable_bytes']} B")
    keys = ("adds_wall", "adds_cpu", "mark_wall", "mark_cpu", "bytes")
    medians = {name: {k: statistics.median(s[k] for s in runs) for k in keys} for name, runs in samples.items()}
    print(f"  {'install':8} {'schema':>6} {'record_adds wall/cpu s':>23} {'mark_launched wall/cpu s':>25}"
          f" {'store MB':>9}")
    for name, m in medians.items():
        print(f"  {name:8} {samples[name][0]['schema']:>6} {m['adds_wall']:>11.3f} /{m['adds_cpu']:>7.3f}"
              f"   {m['mark_wall']:>13.3f} /{m['mark_cpu']:>7.3f}   {m['bytes'] / 1e6:>8.2f}")
    if "against" in medians:
        this, base = medians["this"], medians["against"]
        print("  this / against: " + ", ".join(
            f"{k} {this[k] / base[k]:.2f}x" for k in keys if base[k]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
