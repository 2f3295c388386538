"""xgcp benchmarks against the fake Vertex API (plugins/xgcp/tests/fake_vertex.py).

    .venv/bin/python plugins/xgcp/bench/bench_vertex.py [--trials 100]

Prints, next to the targets of issue 10:
- a sweep of N trials created through the core (time, create and list calls);
- the status of the N trials through the plugin hook (list calls: target 1; time: target < 1 s);
- the import cost of ``xgcp`` before first use (target: nothing heavy) and of the first use
  (the aiplatform_v1 client import, paid once per process that talks to Vertex);
- relaunch of an unchanged containerised project (``xm.python_container``) in a new launcher
  process against the real dockerd and the registry on 127.0.0.1:5000 (target: 0 builds,
  0 pushes), alternated with the baseline a user would run without the content check
  (``docker build`` with a warm cache, then ``docker push`` of layers the registry has).
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


RELAUNCH = """
import json, sys, time
t0 = time.perf_counter()
import xcore as xm, xgcp
from xcore import images
with xm.create_experiment("bench-relaunch") as experiment:
    t1 = time.perf_counter()
    [exe] = experiment.package([xm.python_container(xgcp.Vertex.Spec(), xm.ModuleName("app"), path=sys.argv[1],
                                                    base_image="xcore-python:3.11")])
    t2 = time.perf_counter()
print(json.dumps({"secs": time.perf_counter() - t0, "package": t2 - t1, "image": exe.image_uri,
                  "builds": len(images.BUILDS), "pushes": len(images.PUSHES)}))
"""


def relaunch(home: str, repeats: int = 5) -> None:
    """Package an unchanged containerised project from new processes (real dockerd and registry)."""
    import json
    import shutil
    import statistics
    import urllib.request

    try:
        urllib.request.urlopen("http://127.0.0.1:5000/v2/", timeout=2).close()
    except OSError:
        print("relaunch of an unchanged containerised project: skipped (no registry on 127.0.0.1:5000)")
        return
    project = Path(home) / "project"
    (project / "app").mkdir(parents=True)
    (project / "app" / "__main__.py").write_text(f"print({time.time()!r})\n")
    for i in range(50):
        (project / "app" / f"mod{i}.py").write_text(f"VALUE = {i}\n" + "# padding\n" * 200)
    (Path(home) / "vertex.toml").write_text('default = "bench"\n[targets.bench]\nproject = "bench"\n'
                                            'registry = "127.0.0.1:5000/xgcp-bench"\n')

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", RELAUNCH, str(project)], capture_output=True, text=True,
                              check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = run()
    image = first["image"]
    context = Path(home) / "baseline"
    shutil.copytree(project, context / "project")
    (context / "Dockerfile").write_text("FROM xcore-python:3.11\nCOPY project/ /app/\nWORKDIR /app\n"
                                        'ENTRYPOINT ["python3", "-m", "app"]\n')
    baseline_tag = image.replace("/xgcp-bench/", "/xgcp-bench-baseline/")
    docker = shutil.which("docker") or "docker"

    def baseline() -> float:
        start = time.perf_counter()
        subprocess.run([docker, "build", "-q", "-t", baseline_tag, str(context)], capture_output=True, check=True)
        subprocess.run([docker, "push", "-q", baseline_tag], capture_output=True, check=True)
        return time.perf_counter() - start

    baseline()  # first build and push of the baseline image
    ours, packaging, theirs, builds, pushes = [], [], [], 0, 0
    for _ in range(repeats):
        result = run()
        ours.append(result["secs"])
        packaging.append(result["package"])
        builds, pushes = builds + result["builds"], pushes + result["pushes"]
        assert result["image"] == image
        theirs.append(baseline())
    subprocess.run([docker, "rmi", "-f", baseline_tag], capture_output=True, check=False)
    mine, base = statistics.median(ours), statistics.median(theirs)
    print(f"containerised project: first launch packaged in {first['secs']:.2f} s ({first['builds']} build, "
          f"{first['pushes']} push); unchanged relaunch in a new process: {mine:.2f} s median of {repeats} "
          f"(of which experiment.package {statistics.median(packaging):.2f} s), {builds} builds, {pushes} pushes   "
          f"[target: 0 builds, 0 pushes]; baseline docker build + docker push (warm cache, CLI): {base:.2f} s "
          f"(package step {statistics.median(packaging) / base:.2f}x of it)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--relaunch-only", action="store_true", help="only the containerised relaunch figures")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="xgcp-bench-")
    os.environ.update(XCORE_HOME=home, XCORE_QUIET="1", XCORE_CONFIG_DIR=home, GOOGLE_CLOUD_PROJECT="bench")
    if args.relaunch_only:
        relaunch(home)
        print(f"load average: {os.getloadavg()[0]:.1f} (machine shared with other work)")
        return
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
    relaunch(home)
    print(f"load average: {os.getloadavg()[0]:.1f} (machine shared with other work)")


if __name__ == "__main__":
    main()
