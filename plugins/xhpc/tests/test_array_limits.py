"""The array size limit comes from the cluster (Slurm MaxArraySize, SGE max_aj_tasks), cached
per cluster, not from a fixed 1001: more tasks than the old default are still one array job."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _slurm_reconfigure(accepts: int | None = None, refuses: int | None = None) -> None:
    """``scontrol reconfigure`` until an array of ``accepts`` tasks is accepted and one of
    ``refuses`` refused (probes submitted held, then cancelled). slurmctld (22.05) reads
    max_array_tasks again only when its config's timestamp, in whole seconds, changed: a
    reconfigure within the same second as the last one keeps the old limit."""
    def refused(tasks: int) -> bool:
        probe = subprocess.run(["sbatch", "--parsable", "--hold", f"--array=0-{tasks - 1}", "--wrap", "true"],
                               capture_output=True, text=True, check=False)
        if probe.returncode == 0:
            subprocess.run(["scancel", probe.stdout.strip().split(";")[0]], capture_output=True, check=False)
        return probe.returncode != 0

    for _ in range(5):
        time.sleep(1.1)  # a new second: see above
        subprocess.run(["scontrol", "reconfigure"], capture_output=True, check=True)
        if (accepts is None or not refused(accepts)) and (refuses is None or refused(refuses)):
            return
    raise AssertionError(f"slurmctld did not take the array limit (accept {accepts}, refuse {refuses})")


@contextlib.contextmanager
def _slurm_array_limit(size: int) -> Iterator[None]:
    """The test cluster's array limit lowered to ``size`` (as an admin lowers it), restored after.
    Lowered with SchedulerParameters' ``max_array_tasks``: ``scontrol reconfigure`` applies it,
    and Slurm refuses a larger array just as for MaxArraySize (which needs a restart)."""
    conf = Path("/etc/slurm/slurm.conf")
    original = conf.read_text()
    raw = _raw_limit("slurm")
    lowered, found = re.subn(r"(?m)^SchedulerParameters=(.*)$", rf"SchedulerParameters=\1,max_array_tasks={size}",
                             original)
    try:
        conf.write_text(lowered if found else f"{original.rstrip()}\nSchedulerParameters=max_array_tasks={size}\n")
        _slurm_reconfigure(accepts=size, refuses=size + 1)
        yield
    finally:
        # slurmctld keeps the last max_array_tasks it read when the option goes away: set it to
        # MaxArraySize first (the limit as before), then put the file back as it was.
        conf.write_text(re.sub(r"max_array_tasks=\d+", f"max_array_tasks={raw}", conf.read_text()))
        _slurm_reconfigure(accepts=size + 1)
        conf.write_text(original)
        _slurm_reconfigure(accepts=size + 1)


@contextlib.contextmanager
def _sge_array_limit(size: int, tmp: Path) -> Iterator[None]:
    """The test cluster's ``max_aj_tasks`` lowered to ``size``, restored after (qconf -Mconf
    names the configuration after the file: ``global``)."""
    original = subprocess.run(["qconf", "-sconf", "global"], capture_output=True, text=True, check=True).stdout
    (tmp / "orig").mkdir(mode=0o700)
    (tmp / "low").mkdir(mode=0o700)
    (tmp / "orig" / "global").write_text(original)
    (tmp / "low" / "global").write_text(re.sub(r"(?m)^max_aj_tasks\s+\d+", f"max_aj_tasks {size}", original))
    try:
        subprocess.run(["qconf", "-Mconf", str(tmp / "low" / "global")], capture_output=True, check=True)
        assert _raw_limit("sge") == size
        yield
    finally:
        subprocess.run(["qconf", "-Mconf", str(tmp / "orig" / "global")], capture_output=True, check=True)


def _launch_with_stale_limit(xcore_env: Path, scheduler: str, lowered: Any, cached: int,
                             ) -> tuple[list[Any], list[dict], list[str]]:
    """25 tasks launched while the cache says ``cached`` and the cluster allows 11: what the
    store recorded, their handles and the array jobs."""
    import xhpc
    from xcore.paths import plugin_state_dir
    from xhpc import array_limits, config

    executor_cls, kind = (xhpc.Slurm, "slurm") if scheduler == "slurm" else (xhpc.GridEngine, "sge")
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", kind, "local", str(xcore_env / "staging")))
    array_limits.learn(config.resolve("test", kind), plugin_state_dir("xhpc"), [f"{array_limits.MARK} {cached}"])
    with lowered:
        with xm.create_experiment(title="stale array limit") as experiment:
            [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), executor_cls.Spec())])
            executor = executor_cls(cluster="test", time_limit="0:05:00")
            for i in range(25):
                experiment.add(xm.Job(exe, executor, args=[str(i)]))
    jobs = [j for unit in experiment._store.work_units(experiment.experiment_id) for j in unit.jobs]
    handles = [j.handle for j in jobs if j.handle]
    return jobs, handles, sorted({h["job_id"] for h in handles if h.get("job_id")})


@pytest.mark.parametrize(("scheduler", "cached"), [("slurm", 100001), ("slurm", 20), ("sge", 75000)],
                         ids=["slurm", "slurm-one-chunk-accepted", "sge"])
def test_stale_cached_limit_is_read_again_and_the_refused_tasks_split_again(
        xcore_env: Path, tmp_path: Path, scheduler: str, cached: int, capfd: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster's array limit was lowered after it was cached: the refused array is not a
    failed launch; the limit is read again, the tasks go as smaller arrays, and the launch says so.
    With a cached 20, the chunk of 20 is refused and the one of 5 accepted: only the 20 go again."""
    require_service(scheduler, lambda: service_up(scheduler), HOW)
    require_service("root", os.geteuid() == 0, "changes the test cluster's array limit: run as root")
    if scheduler == "slurm":
        lowered: Any = _slurm_array_limit(11)
    else:
        (tmp_path / "sge").mkdir(mode=0o700)
        lowered = _sge_array_limit(11, tmp_path / "sge")
    monkeypatch.delenv("XCORE_QUIET", raising=False)
    jobs, handles, array_jobs = _launch_with_stale_limit(xcore_env, scheduler, lowered, cached)
    said = capfd.readouterr().err
    try:
        failed = [(j.status, j.message) for j in jobs if j.status == xm.Status.FAILED or not j.handle]
        assert (len(jobs), len(handles), len(failed)) == (25, 25, 0), failed[:3]
        assert len(array_jobs) == 3, f"25 tasks at a limit of 11 became {len(array_jobs)} array jobs"
        assert sorted(h["index"] for h in handles) == list(range(25))
        # A later process adopting the run (xhpc.adoption) finds each task in the chunk it went with.
        [run_dir] = {h["run_dir"] for h in handles}
        chunks = json.loads((Path(run_dir) / "xcore-jobs.json").read_text())["chunks"]
        assert sorted(offset + t for _, offset, count in chunks for t in range(count)) == list(range(25))
        assert {(h["chunk"], h["index"]) for h in handles} == {
            (k, offset + t) for k, offset, count in chunks for t in range(count)}
        assert [entry["limit"] for entry in _cached(xcore_env / "home").values()] == [11]
        assert f"array size limit is now 11, not the {cached} cached" in said, said
    finally:
        if array_jobs:  # only this test's jobs
            subprocess.run(["scancel" if scheduler == "slurm" else "qdel", *array_jobs], capture_output=True,
                           check=False)
