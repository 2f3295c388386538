"""The array size limit comes from the cluster (Slurm MaxArraySize, SGE max_aj_tasks), cached
per cluster, not from a fixed 1001: more tasks than the old default are still one array job."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import require_service
from xhpc_helpers import HOW, cluster_toml, service_up

pytestmark = pytest.mark.infra("slurm")


def _raw_limit(scheduler: str) -> int:
    """What the scheduler itself says, read here without xhpc (the oracle)."""
    if scheduler == "slurm":
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
        return int(next(line.split("=")[1] for line in out.splitlines() if line.startswith("MaxArraySize")))
    out = subprocess.run(["qconf", "-sconf"], capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[1] for line in out.splitlines() if line.startswith("max_aj_tasks"))) or 10**9


def _cached(home: Path) -> dict:
    [path] = list(home.rglob("array-limits.json"))
    assert path.stat().st_mode & 0o077 == 0
    return json.loads(path.read_text())


def _launch(n: int, executor_cls: type, spec: object) -> list[dict]:
    import xhpc

    with xm.create_experiment(title="array limit") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), spec)])
        executor = executor_cls(cluster="test", time_limit="0:05:00")
        for i in range(n):
            experiment.add(xm.Job(exe, executor, args=[str(i)]))
    return [j.handle for unit in experiment._store.work_units(experiment.experiment_id) for j in unit.jobs]


def test_slurm_limit_is_read_from_the_cluster_and_more_than_1001_tasks_are_one_array(xcore_env: Path) -> None:
    require_service("slurm", lambda: service_up("slurm"), HOW)
    import xhpc

    raw = _raw_limit("slurm")
    assert raw > 1002, f"this test needs MaxArraySize > 1002, the cluster has {raw}"
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "slurm", "local", str(xcore_env / "staging")))
    handles = _launch(1002, xhpc.Slurm, xhpc.Slurm.Spec())
    array_jobs = sorted({h["job_id"] for h in handles if h and h.get("job_id")})
    try:
        assert len(handles) == 1002 and all(h is not None for h in handles)
        assert len(array_jobs) == 1, f"1002 tasks became {len(array_jobs)} array jobs"
        [limit] = [entry["limit"] for entry in _cached(xcore_env / "home").values()]
        assert limit == raw
    finally:
        if array_jobs:
            subprocess.run(["scancel", *array_jobs], capture_output=True, check=False)  # only this test's job


def test_sge_limit_is_read_from_the_cluster(xcore_env: Path) -> None:
    require_service("sge", lambda: service_up("sge"), HOW)
    import xhpc

    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "sge", "local", str(xcore_env / "staging")))
    handles = _launch(2, xhpc.GridEngine, xhpc.GridEngine.Spec())
    array_jobs = sorted({h["job_id"] for h in handles if h and h.get("job_id")})
    try:
        [limit] = [entry["limit"] for entry in _cached(xcore_env / "home").values()]
        assert limit == _raw_limit("sge")
    finally:
        if array_jobs:
            subprocess.run(["qdel", *array_jobs], capture_output=True, check=False)  # only this test's job


def test_configured_max_array_size_wins_and_nothing_is_asked(xcore_env: Path) -> None:
    from xhpc import array_limits
    from xhpc.config import Cluster

    cluster = Cluster(name="c", max_array_size=7)
    assert array_limits.query(cluster, xcore_env) == ""
    assert array_limits.limit(cluster, xcore_env) == 7
    unset = Cluster(name="c")
    assert "MaxArraySize" in array_limits.query(unset, xcore_env)
    array_limits.learn(unset, xcore_env, ["/staging", f"{array_limits.MARK} 100001"])
    assert array_limits.limit(unset, xcore_env) == 100001 and array_limits.query(unset, xcore_env) == ""
