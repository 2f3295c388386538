"""xgcp benchmarks against the fake Vertex API (plugins/xgcp/tests/fake_vertex.py).

    .venv/bin/python plugins/xgcp/bench/bench_vertex.py [--trials 100]

Prints, next to the targets of issue 10:
- a sweep of N trials created through the core (time, create and list calls);
- the status of the N trials through the plugin hook (list calls: target 1; time: target < 1 s);
- the import cost of ``xgcp`` before first use (target: nothing heavy) and of the first use
  (the aiplatform_v1 client import, paid once per process that talks to Vertex).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def import_cost(code: str) -> float:
    """Median wall seconds of ``python -c code`` minus a bare interpreter, over 3 runs."""
    def run(c: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", c], check=True)
        return time.perf_counter() - start

    samples = sorted(run(code) - run("pass") for _ in range(3))
    return max(samples[1], 0.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="xgcp-bench-")
    os.environ.update(XCORE_HOME=home, XCORE_QUIET="1", XCORE_CONFIG_DIR=home, GOOGLE_CLOUD_PROJECT="bench")
    from fake_vertex import FakeVertex

    fake = FakeVertex(auto_run=False).start()
    os.environ.update(XGCP_API_ENDPOINT=fake.endpoint, XGCP_LOGGING_ENDPOINT=fake.endpoint)

    import xcore as xm
    import xgcp
    from xgcp import api

    api.client("us-central1")  # the client import is measured separately below
    start = time.perf_counter()
    with xm.create_experiment("bench") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), "fake.registry/bench:1")])
        for i in range(args.trials):
            experiment.add(xm.Job(exe, xgcp.Vertex(), args={"trial": i}))
    created = time.perf_counter() - start
    print(f"sweep of {args.trials} trials created: {created:.2f} s, {fake.calls['create']} create calls, "
          f"{fake.calls['list']} list calls (target: {args.trials} creates, no duplicates)")

    from xcore.hooks.host import get_host
    from xcore.launch.registry import open_store

    host = get_host()
    records = [j for u in open_store().work_units(experiment.experiment_id) for j in u.jobs]
    handles = [host.serializer.load(j.handle) for j in records]
    for name in list(fake.jobs)[: args.trials // 2]:
        fake.set_state(name, "SUCCEEDED")
    before = fake.calls["list"]
    start = time.perf_counter()
    states = host.job_states(records[0].handle_kind, handles)
    status_secs = time.perf_counter() - start
    print(f"status of {len(states)} trials: {status_secs:.3f} s, {fake.calls['list'] - before} list call(s) "
          f"(target: 1 call, < 1 s)")
    fake.stop()

    light = import_cost("import xgcp, xgcp.hooks; xgcp.Vertex")
    core = import_cost("from xcore import plugin; plugin.Executor; plugin.JobHandle; plugin.hookimpl")
    heavy = import_cost("from google.cloud import aiplatform_v1")
    probe = ("import sys; b = set(sys.modules); import xgcp, xgcp.hooks; "
             "xgcp.Vertex; print(len([m for m in set(sys.modules) - b if m.startswith('google.')]))")
    loaded = subprocess.run([sys.executable, "-c", probe],
                            capture_output=True, text=True, check=True).stdout.strip()
    print(f"import xgcp (before first use): {light * 1000:.0f} ms, of which the xcore plugin API {core * 1000:.0f} ms; "
          f"google modules loaded: {loaded} (target: nothing heavy)")
    print(f"first use (aiplatform_v1 import, once per process): {heavy:.2f} s")


if __name__ == "__main__":
    main()
