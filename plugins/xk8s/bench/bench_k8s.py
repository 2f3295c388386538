"""xk8s benchmarks against the fake API server (tests/fake_apiserver.py), real client.

    .venv/bin/python plugins/xk8s/bench/bench_k8s.py [--trials 1000]

Prints each figure next to its target (issue 9): a 1,000-trial sweep launched with one
create for the sweep plus its ConfigMap; status of 1,000 trials in at most 2 API calls and
under 1 s (one more, for the Kueue Workloads, only while a Job waits for admission); nothing
heavy imported by ``import xk8s``. The fake answers on 127.0.0.1, so the
times are the client's and xk8s's own work plus loopback HTTP, not a real cluster's latency.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def import_cost() -> tuple[float, list[str]]:
    code = ("import sys, time; t = time.perf_counter(); import xk8s, xk8s.hooks; xk8s.Kubernetes(); "
            "print(time.perf_counter() - t); print(','.join(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'kubernetes', 'urllib3', 'yaml', 'google', 'pydantic'})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    return float(out[0]), [m for m in out[1].split(",") if m]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    n = args.trials

    from fake_apiserver import FakeCluster

    from xcore.testing import make_launch_context, make_request

    seconds, heavy = import_cost()
    print(f"import xk8s (+hooks, an executor): {seconds * 1000:.0f} ms; heavy modules imported: "
          f"{heavy or 'none'}   [target: nothing heavy]")

    tmp = Path(tempfile.mkdtemp(prefix="xk8s-bench-"))
    fake = FakeCluster(run_pods=False)
    fake.serve()
    os.environ["KUBECONFIG"] = str(fake.kubeconfig(tmp / "kubeconfig"))
    os.environ["XCORE_HOME"] = str(tmp / "home")
    os.environ["XCORE_CONFIG_DIR"] = str(tmp / "config")
    import kubernetes_validate  # noqa: F401  - the fake's own validator, loaded before timing

    import xk8s
    from xk8s import client, hooks

    started = time.perf_counter()
    client.batch(None), client.core(None)
    print(f"first use of the kubernetes client (importing kubernetes.client and its models, kubeconfig): "
          f"{time.perf_counter() - started:.2f} s   [paid once per process, on the first API call]")

    exe = xk8s.KubernetesExecutable(name="train", image="registry.example/train:1",
                                    command=["python3", "-m", "train"])
    executor = xk8s.Kubernetes(retries=1)
    requests = [make_request(exe, executor, [f"--lr={1e-3 * (i + 1):g}", f"--seed={i}"], {"TRIAL": str(i)})
                for i in range(n)]
    fake.requests.clear()
    started = time.perf_counter()
    handles = hooks.KubernetesBackend().launch(requests, make_launch_context(tmp / "state"))
    launch_secs = time.perf_counter() - started
    creates = fake.calls("POST")
    print(f"launch a {n}-trial sweep: {launch_secs:.2f} s, {fake.calls()} API calls ({creates} creates: "
          f"{fake.calls('POST', '/jobs')} Job, {fake.calls('POST', '/configmaps')} ConfigMap)   "
          f"[target: 1 create for the sweep + the ConfigMap]")

    name = handles[0].name
    with fake.lock:  # the Job controller made a pod per index (parallelism = n); move them along
        for i in range(n):
            fake.start(name, i) if i % 3 else None
        for i in range(0, n, 2):
            if i % 3:
                fake.finish(name, i, 0 if i % 10 else 1)
    fake.requests.clear()
    started = time.perf_counter()
    states = hooks.KubernetesBackend().states(handles)
    status_secs = time.perf_counter() - started
    counts: dict[str, int] = {}
    for s in states:
        counts[s.status.name] = counts.get(s.status.name, 0) + 1
    print(f"status of {n} trials: {status_secs:.2f} s, {fake.calls()} API calls ({counts})   "
          f"[target: <= 2 calls, < 1 s]")

    queued = [make_request(exe, xk8s.Kubernetes(queue="lab-queue"), [f"--seed={i}"], experiment_id=2)
              for i in range(n)]
    waiting = hooks.KubernetesBackend().launch(queued, make_launch_context(tmp / "state"))
    fake.workload(waiting[0].name)  # Kueue has made its Workload
    fake.requests.clear()
    started = time.perf_counter()
    states = hooks.KubernetesBackend().states(waiting)
    status_secs = time.perf_counter() - started
    print(f"status of {n} trials waiting for Kueue: {status_secs:.2f} s, {fake.calls()} API calls (Jobs, Pods, "
          f"Workloads); reason: {states[0].message!r}   [target: the Kueue reason, 1 call more only while waiting]")
    fake.close()
    relaunch(tmp)


def relaunch(tmp: Path) -> None:
    """Package an unchanged containerised project twice (real dockerd and registry, if up)."""
    import urllib.request

    import xcore as xm
    import xk8s
    from xcore import images
    from xcore.testing import make_packaging_context
    from xk8s import hooks

    try:
        urllib.request.urlopen("http://127.0.0.1:5000/v2/", timeout=2).close()
    except OSError:
        print("relaunch of an unchanged container project: skipped (no registry on 127.0.0.1:5000; "
              "scripts/infra/setup.sh registry)")
        return
    project = tmp / "project"
    (project / "bench_pkg").mkdir(parents=True)
    (project / "bench_pkg" / "__main__.py").write_text(f"print({time.time()!r})\n")
    packageable = xm.python_container(xk8s.KubernetesSpec(registry="127.0.0.1:5000/xcore-bench"),
                                      xm.ModuleName("bench_pkg"), path=str(project), base_image="xcore-python:3.11")
    context = make_packaging_context(tmp / "cache")
    started = time.perf_counter()
    hooks.KubernetesBackend().package(packageable, context)
    first = time.perf_counter() - started
    builds, pushes = len(images.BUILDS), len(images.PUSHES)
    started = time.perf_counter()
    hooks.KubernetesBackend().package(packageable, context)
    again = time.perf_counter() - started
    print(f"containerised project: first package {first:.2f} s (1 build, 1 push); unchanged relaunch {again:.2f} s, "
          f"{len(images.BUILDS) - builds} builds, {len(images.PUSHES) - pushes} pushes   [target: no build, no push]")


if __name__ == "__main__":
    main()
