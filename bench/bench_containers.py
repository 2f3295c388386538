"""xlocal containers on a real Docker engine: build, relaunch packaging, per-container start.

Needs dockerd and the base image (``sudo bash scripts/infra/docker.sh``) and the docker SDK
(``pip install 'xcore-xlocal[docker]'``).

Measured:
  1. cold build: packaging a fresh PythonContainer project whose requirements.txt (``six``)
     is installed by pip inside the build;
  2. relaunch packaging: ``experiment.package`` of the unchanged project in a NEW launcher
     process (includes importing the docker SDK and connecting), median of REPEATS; the
     script checks that no build ran. Target: no build, < 0.5 s;
  3. per-container start: one job of ``xm.container(IMAGE)`` running ``true`` from
     ``experiment.add`` until the store says COMPLETED, median of REPEATS, against the
     baseline ``docker run --rm IMAGE true`` (CLI), median of REPEATS;
  4. a sweep of N such containers: wall time from the first add to all COMPLETED, per container.

Run: .venv/bin/python bench/bench_containers.py [REPEATS] [N]
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, median_ms, temp_home, time_subprocess, verdict

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20
IMAGE = os.environ.get("XLOCAL_BENCH_IMAGE", "xcore-python:3.11")
DOCKER = shutil.which("docker") or "docker"

RELAUNCH = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.perf_counter()
    import xcore as xm
    import xlocal
    with xm.create_experiment("bench-relaunch") as experiment:
        t1 = time.perf_counter()
        [exe] = experiment.package([xm.python_container(
            xlocal.Local.Spec(), xm.ModuleName("app.main"), path=sys.argv[1], base_image=sys.argv[2])])
        t2 = time.perf_counter()
    print(json.dumps({"package": t2 - t1, "total": t2 - t0, "image": exe.image}))
    """
)


def make_project(root: Path) -> Path:
    project = root / "bench_project"
    (project / "app").mkdir(parents=True)
    (project / "app" / "__init__.py").write_text("")
    (project / "app" / "main.py").write_text("import sys, six\nprint(sys.argv[1:], six.__version__)\n")
    for i in range(50):  # a few dozen source files, like a small real project
        (project / "app" / f"mod{i}.py").write_text(f"VALUE = {i}\n" + "# padding\n" * 200)
    (project / "requirements.txt").write_text(f"six  # bench {secrets.token_hex(4)}\n")
    return project


def cold_build(project: Path) -> tuple[float, str]:
    import xcore as xm
    import xlocal

    with xm.create_experiment("bench-build") as experiment:
        start = time.perf_counter()
        [exe] = experiment.package([xm.python_container(
            xlocal.Local.Spec(), xm.ModuleName("app.main"), path=str(project), base_image=IMAGE)])
        return time.perf_counter() - start, exe.image


def relaunch(project: Path) -> list[dict]:
    results = []
    for _ in range(REPEATS):
        done = subprocess.run([PYTHON, "-c", RELAUNCH, str(project), IMAGE], capture_output=True, text=True,
                              env={**os.environ, "XCORE_QUIET": "0"}, check=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["built"] = "building " in done.stderr
        results.append(result)
    return results


CREATED: list[str] = []  # container ids this benchmark started, removed at the end


def remember(experiment) -> None:
    import xcore.hooks.host

    serializer = xcore.hooks.host.get_host().serializer
    CREATED.extend(serializer.load(j.handle).container_id for j in experiment._all_jobs() if j.handle)


def container_start_latency() -> list[float]:
    import xcore as xm
    import xlocal

    samples = []
    with xm.create_experiment("bench-start") as experiment:
        [exe] = experiment.package([xm.container(xlocal.Local.Spec(), IMAGE)])
        for _ in range(REPEATS):
            start = time.perf_counter()
            unit = experiment.add(xm.Job(exe, xlocal.Local(), args=["true"])).result()
            unit.wait_until_complete().result(timeout=60)
            samples.append(time.perf_counter() - start)
        remember(experiment)
    return samples


def sweep() -> float:
    import xcore as xm
    import xlocal

    with xm.create_experiment("bench-sweep") as experiment:
        [exe] = experiment.package([xm.container(xlocal.Local.Spec(), IMAGE)])
        start = time.perf_counter()
        for i in range(N):
            experiment.add(xm.Job(exe, xlocal.Local(), args=["true", str(i)]))
        jobs = experiment.wait_until_complete(timeout=600)
        wall = time.perf_counter() - start
        remember(experiment)
    assert all(j.status.value == "COMPLETED" for j in jobs), [j.message for j in jobs]
    return wall


def remove_bench_containers() -> None:
    ids = [i for i in CREATED if i]
    for start in range(0, len(ids), 100):
        subprocess.run([DOCKER, "rm", "-f", *ids[start:start + 100]], stdout=subprocess.DEVNULL, check=False)


def main() -> int:
    os.environ["XCORE_QUIET"] = "1"
    os.environ.setdefault("XCORE_BATCH_WINDOW", "0.01")
    work = Path(tempfile.mkdtemp(prefix="xcore-bench-containers-"))
    image = ""
    try:
        with temp_home():
            project = make_project(work)
            build_s, image = cold_build(project)
            runs = relaunch(project)
            package_s = statistics.median(r["package"] for r in runs)
            total_s = statistics.median(r["total"] for r in runs)
            rebuilt = any(r["built"] or r["image"] != image for r in runs)
            time_subprocess([DOCKER, "run", "--rm", IMAGE, "true"])  # warm-up
            baseline = [time_subprocess([DOCKER, "run", "--rm", IMAGE, "true"]) for _ in range(REPEATS)]
            latency = container_start_latency()
            sweep_s = sweep()
    finally:
        remove_bench_containers()
        if image:
            subprocess.run([DOCKER, "rmi", "-f", image], stdout=subprocess.DEVNULL, check=False)
        shutil.rmtree(work, ignore_errors=True)

    base_ms, start_ms = median_ms(baseline), median_ms(latency)
    print(f"cold build (pip install six inside):        {build_s:6.2f} s   image {image}")
    print(f"relaunch, unchanged project, new process:   package {package_s * 1000:6.0f} ms median "
          f"(process total {total_s * 1000:.0f} ms), rebuilt: {rebuilt}   "
          f"[{verdict(not rebuilt and package_s < 0.5)} target: no build, < 500 ms]")
    print(f"docker run --rm {IMAGE} true (baseline):  {base_ms:6.0f} ms median of {REPEATS}")
    print(f"xcore add -> COMPLETED, one container:      {start_ms:6.0f} ms median of {REPEATS}   "
          f"overhead vs baseline {start_ms - base_ms:+.0f} ms ({start_ms / base_ms:.2f}x)")
    print(f"sweep of {N} containers, add -> all done:    {sweep_s:6.2f} s = {sweep_s / N * 1000:.0f} ms per container "
          f"(baseline run serially: {base_ms * N / 1000:.2f} s)")
    return 0 if not rebuilt and package_s < 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
