"""`xcore ui` page times with big stores (issue 12).

Figures (a real `xcore ui` process on 127.0.0.1, timed from a client over HTTP, median of
REPEATS requests after one warm-up, in a temporary XCORE_HOME):
  1. the experiment page of a 10,000-trial sweep (arguments, losses, statuses): the
     default view, sorted by a result, and a deep page; target < 1 s;
  2. the experiments list with 10,000 experiments: first page, a search and a deep page;
     target < 300 ms;
  3. the JSON the experiment page's plot and timeline load after it (all 10,000 units; no
     target: it arrives after the page is shown).
Baseline: the same server's /static/ui.css (the cost of a request that reads nothing).

Run: .venv/bin/python bench/bench_ui.py [REPEATS]
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, temp_home, verdict  # noqa: E402

TRIALS = 10_000
EXPERIMENTS = 10_000
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 7


def seed() -> int:
    from xcore.launch.registry import open_store
    from xcore.ui.sample import sample_sweep

    store = open_store()
    start = time.perf_counter()
    for i in range(EXPERIMENTS - 1):
        record = store.create_experiment(f"experiment {i}", tags=["bench", f"group-{i % 10}"], user=f"user{i % 5}")
        store.update_experiment(record.id, launch_status="LAUNCHED")
    sweep = sample_sweep(store, TRIALS, title="the 10,000-trial sweep", tags=["sweep"])
    print(f"seeded {EXPERIMENTS} experiments and a {TRIALS}-trial sweep in {time.perf_counter() - start:.1f} s")
    store.close()
    return sweep


def timed(url: str) -> tuple[float, int]:
    samples, size = [], 0
    urllib.request.urlopen(url).read()  # warm-up
    for _ in range(REPEATS):
        start = time.perf_counter()
        size = len(urllib.request.urlopen(url).read())
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000, size


def main() -> None:
    with temp_home("xcore-bench-ui-"):
        sweep = seed()
        for cache in ("0", "2"):
            print(f"\n-- XCORE_UI_CACHE_SECS={cache}"
                  f" ({'every request reads the store' if cache == '0' else 'default: rows reused for 2 s'})")
            serve(sweep, {**os.environ, "XCORE_UI_CACHE_SECS": cache})


def serve(sweep: int, env: dict[str, str]) -> None:
    server = subprocess.Popen([PYTHON, "-m", "xcore.cli.main", "ui", "--port", "0", "--poll", "3600"],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stdout.readline() if server.stdout else ""
        match = re.search(r"(http://\S+?)/?$", line.strip())
        assert match, f"no URL from xcore ui: {line!r}"
        base = match.group(1)
        baseline, _ = timed(base + "/static/ui.css")
        print(f"baseline: GET /static/ui.css {baseline:.1f} ms")
        rows = [
            ("experiment page, 10k trials", f"/experiments/{sweep}", 1000),
            ("  sorted by -loss", f"/experiments/{sweep}?sort=-result:loss", 1000),
            ("  filtered lr=0.1, page 5", f"/experiments/{sweep}?q=lr%3D0.1&page=5", 1000),
            ("  page 150 of 200", f"/experiments/{sweep}?page=150", 1000),
            ("list page, 10k experiments", "/", 300),
            ("  search 'experiment 99'", "/?q=experiment+99", 300),
            ("  page 100", "/?page=100", 300),
            ("chart JSON (10k units)", f"/api/experiments/{sweep}/chart", None),
        ]
        for label, path, target in rows:
            ms, size = timed(base + path)
            mark = f"target < {target} ms: {verdict(ms < target)}" if target else "no target"
            print(f"{label:32s} {ms:8.1f} ms  {size / 1024:7.0f} KiB  ({mark})")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
