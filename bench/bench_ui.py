"""`xcore ui` page times with big stores (issues 12 and 26).

Figures (a real `xcore ui` process on 127.0.0.1, timed from a client over HTTP, median of
REPEATS requests after one warm-up, in a temporary XCORE_HOME):
  1. the experiment page of a TRIALS-trial sweep (default 100,000: arguments, losses,
     statuses): the default view, sorted by a result, filtered, and a deep page; target
     < 300 ms (the first request, which reads the sweep from the store, is reported apart);
  2. the experiments list with 10,000 experiments: first page, a search and a deep page;
     target < 300 ms;
  3. the JSON the experiment page's charts load after it (sampled to at most 5,000 trials,
     the timeline counted over all; no target: it arrives after the page is shown);
  4. first-visit bytes: the experiment page, every /static file it names, and the JSON its
     scripts load (chart, curves, summary): what a browser with an empty cache fetches.
Baseline: the same server's /static/ui.css (the cost of a request that reads nothing).

Run: .venv/bin/python bench/bench_ui.py [REPEATS] [--trials N]
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

ARGS = [a for a in sys.argv[1:] if not a.startswith("--trials")]
TRIALS = int(next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--trials=")), 100_000))
EXPERIMENTS = 10_000
REPEATS = int(ARGS[0]) if ARGS else 7


def seed() -> int:
    from xcore.launch.registry import open_store
    from xcore.ui.sample import sample_sweep

    store = open_store()
    start = time.perf_counter()
    for i in range(EXPERIMENTS - 1):
        record = store.create_experiment(f"experiment {i}", tags=["bench", f"group-{i % 10}"], user=f"user{i % 5}")
        store.update_experiment(record.id, launch_status="LAUNCHED")
    sweep = sample_sweep(store, TRIALS, title=f"the {TRIALS:,}-trial sweep", tags=["sweep"], curves=True)
    print(f"seeded {EXPERIMENTS} experiments and a {TRIALS}-trial sweep in {time.perf_counter() - start:.1f} s")
    store.close()
    return sweep


TOKEN: dict[str, str] = {}  # the Authorization header `xcore ui`'s printed token gives


def get(url: str) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers=TOKEN)) as answer:
        return answer.read()


def timed(url: str) -> tuple[float, int]:
    samples, size = [], 0
    get(url)  # warm-up
    for _ in range(REPEATS):
        start = time.perf_counter()
        size = len(get(url))
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000, size


def main() -> None:
    with temp_home("xcore-bench-ui-"):
        sweep = seed()
        serve(sweep, dict(os.environ))


def serve(sweep: int, env: dict[str, str]) -> None:
    server = subprocess.Popen([PYTHON, "-m", "xcore.cli.main", "ui", "--port", "0", "--poll", "3600"],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stdout.readline() if server.stdout else ""
        match = re.search(r"(http://[^/\s]+)/\?token=(\S+)", line)
        assert match, f"no URL with its token from xcore ui: {line!r}"
        base = match.group(1)
        TOKEN["Authorization"] = "Bearer " + match.group(2)
        baseline, _ = timed(base + "/static/ui.css")
        print(f"baseline: GET /static/ui.css {baseline:.1f} ms")
        start = time.perf_counter()
        get(f"{base}/experiments/{sweep}")
        print(f"first request for the sweep (reads it from the store): {(time.perf_counter() - start) * 1000:.0f} ms;"
              " later ones reuse a read for 2 s, or the last slow read while a thread reads it anew")
        page_target = 300
        rows = [
            (f"experiment page, {TRIALS:,} trials", f"/experiments/{sweep}", page_target),
            ("  sorted by -loss", f"/experiments/{sweep}?sort=-result:loss", page_target),
            ("  filtered lr=0.1, page 5", f"/experiments/{sweep}?q=lr%3D0.1&page=5", None),
            ("  where lr<=0.03 loss<0.05", f"/experiments/{sweep}?where=lr%3C%3D0.03+loss%3C0.05", None),
            ("  a deep page", f"/experiments/{sweep}?page={TRIALS // 100}", page_target),
            ("list page, 10k experiments", "/", 300),
            ("  search 'experiment 99'", "/?q=experiment+99", 300),
            ("  page 100", "/?page=100", 300),
            ("chart JSON (sampled)", f"/api/experiments/{sweep}/chart", None),
            ("summary JSON (each poll)", f"/api/experiments/{sweep}/summary", None),
            ("curves JSON, grouped by lr", f"/api/experiments/{sweep}/curves?group_by=lr", None),
        ]
        for label, path, target in rows:
            ms, size = timed(base + path)
            mark = f"target < {target} ms: {verdict(ms < target)}" if target else "no target"
            print(f"{label:32s} {ms:8.1f} ms  {size / 1024:7.0f} KiB  ({mark})")
        first_visit(base, sweep)
    finally:
        server.terminate()
        server.wait(10)


def first_visit(base: str, sweep: int) -> None:
    """What a browser with an empty cache fetches for the experiment page, by kind."""
    page = get(f"{base}/experiments/{sweep}")
    sizes = {"page": len(page)}
    for name in sorted(set(re.findall(rb'(?:src|href)="/static/([^"]+)"', page))):
        sizes[name.decode()] = len(get(f"{base}/static/{name.decode()}"))
    for name, path in (("chart JSON", "chart"), ("curves JSON", "curves"), ("summary JSON", "summary")):
        sizes[name] = len(get(f"{base}/api/experiments/{sweep}/{path}"))
    print(f"first visit of the experiment page: {sum(sizes.values()) / 1024:.0f} KiB in all "
          f"(Plotly alone was 4,703 KiB): " + ", ".join(f"{k} {v / 1024:.1f} KiB" for k, v in sizes.items()))


if __name__ == "__main__":
    main()
