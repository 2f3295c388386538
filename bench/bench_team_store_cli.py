"""The team store from the command line (issue 31, targets 1 and 6).

1. `xcore list` and `xcore show EXP` (EXP of 100 work units) on PostgreSQL holding 10,000
   experiments / 1,000,000 jobs, against the same commands on SQLite holding the same rows
   (target 2x) and against `python -c pass` (target 8x).
2. Store growth: `xcore list` on a store of 1,000 experiments and on one of 100,000 (GROWTH_UNITS
   work units x 1 job each), SQLite and PostgreSQL (target: the big one within 1.5x the small one).

Each figure is the median of ROUNDS fresh CLI processes, every case run once per round in turn
(alternated, so all see the same machine load), after one warm-up round; wall and CPU time
(user + system of the child) are printed with the load average of the round. The PostgreSQL rows
live in a database this bench creates (CREATE DATABASE, needs CREATEDB) and drops at the end;
the SQLite files in a throw-away directory. Rows are filled with set-based SQL
(generate_series / INSERT ... SELECT), not through the store, to keep the fill short.

Run from a regular (non-editable) install with the postgres extra:
  python3 -m venv /tmp/b && /tmp/b/bin/pip install '.[postgres]' plugins/xlocal
  /tmp/b/bin/python bench/bench_team_store_cli.py [--quick] [--only cli|growth] [--before BIN] [ROUNDS]
The server: XCORE_BENCH_PG_URL, else /var/lib/xcore-infra/postgres/url. ``--before BIN``: the
``bin`` directory of another install (e.g. the main branch's) whose `list` and `show` run in the
same alternated rounds, for a before/after comparison under the same load.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, XCORE_BIN, load_average, temp_home, time_subprocess, time_subprocess_cpu, verdict  # noqa: E402

QUICK = "--quick" in sys.argv
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
BEFORE = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else None
_NUMBERS = [a for a in sys.argv[1:] if a.isdigit()]
ROUNDS = int(_NUMBERS[0]) if _NUMBERS else 7
BIG = (1_000, 100) if QUICK else (10_000, 100)  # experiments, work units (1 job each) per experiment
GROWTH = (100, 10_000) if QUICK else (1_000, 100_000)
GROWTH_UNITS = 10
EXECUTOR = '{"max_parallel": null, "cwd": null, "inherit_env": true, "docker_options": null, "kill_grace_secs": 5.0}'
EXECUTABLE = '{"name": "true", "command": ["/usr/bin/true"], "args": {"args": [], "kwargs": {}}, "env_vars": {}}'


def server_url() -> str:
    url = os.environ.get("XCORE_BENCH_PG_URL")
    if not url:
        try:
            url = Path("/var/lib/xcore-infra/postgres/url").read_text().strip()
        except OSError:
            raise SystemExit("No PostgreSQL: run `sudo bash scripts/infra/setup.sh postgres` "
                             "or set XCORE_BENCH_PG_URL") from None
    return url


class Database:
    """A database of its own on the server, dropped by ``drop`` (nothing else is touched)."""

    def __init__(self, base: str) -> None:
        from urllib.parse import urlsplit, urlunsplit

        import psycopg

        self.base, self.name = base, "xb_" + uuid.uuid4().hex[:10]
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.name}")
        parts = urlsplit(base)
        self.url = urlunsplit(parts._replace(path="/" + self.name))

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


# The same rows on both databases; {p} is the placeholder. The jobs' spec ids come from _specs.
_ROWS = [
    "INSERT INTO experiments (id, title, tags, \"user\", host, created_at, launch_status)"
    " SELECT g, 'bench ' || g, '[\"bench\"]', 'user' || (g % 7), 'host', {p} + g, 'LAUNCHED' FROM {series_e}",
    "INSERT INTO work_units (experiment_id, id, role, args, status, created_at)"
    " SELECT e, w, 'work_unit', '{{\"seed\": ' || w || '}}', 'COMPLETED', {p} + e FROM {series_ew}",
    "INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor_spec, executable_spec, args, env,"
    " status, message, exit_code, handle_kind, handle, log_path, created_at, launched_at, started_at, ended_at)"
    " SELECT experiment_id, id, 'true', 'xlocal.Local', {p}, {p}, '[\"--seed=' || id || '\"]', '{{}}', 'COMPLETED',"
    " 'exit code 0', 0, 'xlocal.Process', '{{\"pid\": 1}}', '/tmp/log', created_at, created_at, created_at,"
    " created_at + 1 FROM work_units ORDER BY experiment_id, id",
    "INSERT INTO job_events (job_id, status, message, exit_code, at)"
    " SELECT id, 'COMPLETED', 'exit code 0', 0, ended_at FROM jobs",
]


def _specs(db, mark: str) -> tuple[int, int]:
    from xcore.store import specs

    ids = []
    for body in (EXECUTOR, EXECUTABLE):
        db.execute(specs.insert_sql(mark), (specs.digest(body), body))
        ids.append(int(db.execute(specs.select_sql(mark), (specs.digest(body),)).fetchone()[0]))
    return ids[0], ids[1]


def fill_postgres(url: str, experiments: int, units: int) -> None:
    import psycopg

    from xcore.store.postgres import PostgresStore

    PostgresStore(url, migrate=True).close()
    t0 = time.time() - 86400
    with psycopg.connect(url, autocommit=True) as conn:
        executor, executable = _specs(conn, "%s")
        series = {"series_e": f"generate_series(1, {experiments}) g",
                  "series_ew": f"generate_series(1, {experiments}) e, generate_series(1, {units}) w"}
        for sql, params in zip(_ROWS, [(t0,), (t0,), (executor, executable), ()], strict=True):
            conn.execute(sql.format(p="%s", **series).replace("%", "%%").replace("%%s", "%s"), params)
        conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), (SELECT MAX(id) FROM jobs))")
        conn.execute("VACUUM ANALYZE")


def fill_sqlite(path: Path, experiments: int, units: int) -> None:
    import sqlite3

    from xcore.store.sqlite import SqliteStore

    SqliteStore(path).close()
    t0 = time.time() - 86400
    db = sqlite3.connect(path)
    executor, executable = _specs(db, "?")
    count_e = f"s(e) AS (SELECT 1 UNION ALL SELECT e + 1 FROM s WHERE e < {experiments})"
    count_w = f"t(w) AS (SELECT 1 UNION ALL SELECT w + 1 FROM t WHERE w < {units})"
    series = {"series_e": f"(WITH RECURSIVE {count_e} SELECT e AS g FROM s)",
              "series_ew": f"(WITH RECURSIVE {count_e}, {count_w} SELECT e, w FROM s, t)"}
    for sql, params in zip(_ROWS, [(t0,), (t0,), (executor, executable), ()], strict=True):
        db.execute(sql.format(p="?", **series), params)
    db.commit()
    db.execute("ANALYZE")
    db.close()


def measure(cases: dict[str, list[str]], envs: dict[str, dict[str, str]], cwd: str) -> dict[str, dict]:
    """Median wall/CPU of each case over ROUNDS alternated rounds, and the load seen."""
    for name, argv in cases.items():  # warm-up: page cache, .pyc files, the server's buffers
        time_subprocess(argv, envs[name], cwd)
    walls: dict[str, list[float]] = {n: [] for n in cases}
    cpus: dict[str, list[float]] = {n: [] for n in cases}
    loads = []
    for _ in range(ROUNDS):
        for name, argv in cases.items():
            wall, cpu = time_subprocess_cpu(argv, envs[name], cwd)
            walls[name].append(wall)
            cpus[name].append(cpu)
        loads.append(os.getloadavg()[0])
    return {n: {"wall": statistics.median(walls[n]), "cpu": statistics.median(cpus[n]),
                "load": f"{min(loads):.1f}-{max(loads):.1f}"} for n in cases}


def line(name: str, fig: dict, base_name: str, base: dict, target: float) -> bool:
    ratio, cpu_ratio = fig["wall"] / base["wall"], fig["cpu"] / base["cpu"]
    ok = ratio <= target
    print(f"[{verdict(ok)}] {name:<34} {fig['wall'] * 1e3:7.1f} ms ({fig['cpu'] * 1e3:6.1f} ms CPU)  vs "
          f"{base_name:<26} {base['wall'] * 1e3:7.1f} ms ({base['cpu'] * 1e3:6.1f} ms CPU) = {ratio:5.2f}x wall, "
          f"{cpu_ratio:5.2f}x CPU (target {target:g}x; load {fig['load']})")
    return ok


def part_cli(base: str, tmp: Path) -> bool:
    n, u = BIG
    db = Database(base)
    try:
        t = time.perf_counter()
        fill_postgres(db.url, n, u)
        pg_fill = time.perf_counter() - t
        t = time.perf_counter()
        sqlite = tmp / "big.db"
        fill_sqlite(sqlite, n, u)
        sqlite_fill = time.perf_counter() - t
        middle = str(n // 2)
        pg_env, sq_env = {**os.environ, "XCORE_STORE": db.url}, {**os.environ, "XCORE_STORE": f"sqlite:///{sqlite}"}
        cases = {"python -c pass": [PYTHON, "-c", "pass"],
                 "pg list": [XCORE_BIN, "list"], "sqlite list": [XCORE_BIN, "list"],
                 "pg show": [XCORE_BIN, "show", middle], "sqlite show": [XCORE_BIN, "show", middle],
                 "psycopg list": [XCORE_BIN, "list"], "psycopg show": [XCORE_BIN, "show", middle]}
        envs = {name: sq_env if name.startswith(("sqlite", "python")) else pg_env for name in cases}
        for name in ("psycopg list", "psycopg show"):  # every read through psycopg, as before issue 31
            envs[name] = {**pg_env, "XCORE_STORE_LIGHT_READS": "0"}
        if BEFORE:
            for name in ("pg list", "pg show", "sqlite list", "sqlite show"):
                cases[f"before {name}"] = [os.path.join(BEFORE, "xcore"), *cases[name][1:]]
                envs[f"before {name}"] = envs[name]
        figs = measure(cases, envs, str(tmp))
        inside = {name: in_process(url, n // 2) for name, url in (("PostgreSQL", db.url), ("SQLite", f"sqlite:///{sqlite}"))}
    finally:
        db.drop()
    print(f"1. team store CLI: {n:,} experiments x {u} work units x 1 job ({n * u:,} jobs; filled PostgreSQL in "
          f"{pg_fill:.0f} s, SQLite in {sqlite_fill:.0f} s), median of {ROUNDS} alternated rounds, "
          f"cpu count {os.cpu_count()}")
    ok = True
    for cmd, label in (("list", "`xcore list`"), ("show", f"`xcore show {middle}` ({u} units)")):
        ok &= line(f"PostgreSQL {label}", figs[f"pg {cmd}"], f"SQLite {label.split(' (')[0]}", figs[f"sqlite {cmd}"],
                   2.0)
        ok &= line(f"PostgreSQL {label}", figs[f"pg {cmd}"], "`python -c pass`", figs["python -c pass"], 8.0)
    for name in ("pg list", "pg show", "sqlite list", "sqlite show") if BEFORE else ():
        line(f"{name}", figs[name], f"{name} of --before", figs[f"before {name}"], 1.0)
        line(f"{name} of --before", figs[f"before {name}"], "`python -c pass`", figs["python -c pass"], 8.0)
    for cmd in ("list", "show"):
        fig, old = figs[f"pg {cmd}"], figs[f"psycopg {cmd}"]
        print(f"   PostgreSQL `xcore {cmd}` with every read through psycopg (XCORE_STORE_LIGHT_READS=0): "
              f"{old['wall'] * 1e3:.1f} ms ({old['cpu'] * 1e3:.1f} ms CPU); the light reads take "
              f"{fig['wall'] / old['wall']:.2f}x its wall time, {fig['cpu'] / old['cpu']:.2f}x its CPU")
    for name, got in inside.items():
        print(f"   in-process, {name}: open {got['open'] * 1e3:.1f} ms, list_experiments(limit=20) "
              f"{got['list'] * 1e3:.1f} ms, get_experiment + work_units {got['show'] * 1e3:.1f} ms (median of 5)")
    return ok


def in_process(url: str, middle: int) -> dict[str, float]:
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
    opened = median(lambda: host.open_store(url).close())
    store = host.open_store(url)
    try:
        return {"open": opened, "list": median(lambda: store.list_experiments(limit=20)),
                "show": median(lambda: (store.get_experiment(middle), store.work_units(middle)))}
    finally:
        store.close()


def part_growth(base: str, tmp: Path) -> bool:
    small, big = GROWTH
    dbs = {size: Database(base) for size in (small, big)}
    try:
        t = time.perf_counter()
        for size, db in dbs.items():
            fill_postgres(db.url, size, GROWTH_UNITS)
            fill_sqlite(tmp / f"growth-{size}.db", size, GROWTH_UNITS)
        fill = time.perf_counter() - t
        cases, envs = {}, {}
        for size, db in dbs.items():
            for backend, url in (("PostgreSQL", db.url), ("SQLite", f"sqlite:///{tmp}/growth-{size}.db")):
                cases[f"{backend} {size}"] = [XCORE_BIN, "list"]
                envs[f"{backend} {size}"] = {**os.environ, "XCORE_STORE": url}
        figs = measure(cases, envs, str(tmp))
    finally:
        for db in dbs.values():
            db.drop()
    print(f"2. store growth: `xcore list` on {small:,} and on {big:,} experiments x {GROWTH_UNITS} work units x 1 job "
          f"(filled in {fill:.0f} s), median of {ROUNDS} alternated rounds")
    ok = True
    for backend in ("SQLite", "PostgreSQL"):
        ok &= line(f"{backend} list, {big:,} experiments", figs[f"{backend} {big}"], f"{small:,} experiments",
                   figs[f"{backend} {small}"], 1.5)
    return ok


def main() -> int:
    base = server_url()
    from xcore.store.redaction import redact_url

    print(f"team store CLI (issue 31), server {redact_url(base)}, cpu count {os.cpu_count()}, "
          f"load average {load_average()}{' (--quick)' if QUICK else ''}")
    ok = True
    with temp_home() as tmp:
        if ONLY in (None, "cli"):
            ok &= part_cli(base, tmp)
        if ONLY in (None, "growth"):
            ok &= part_growth(base, tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
