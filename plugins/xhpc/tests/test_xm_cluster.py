"""lxm3's ``xm_cluster`` names on xhpc: construction without services, and an lxm3-style
ArrayJob on the real Slurm."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import xcore as xm
import xhpc
from xhpc import xm_cluster


def test_lxm3_names_exist():
    for name in ("ArrayJob", "create_experiment", "Local", "Slurm", "GridEngine", "SingularityOptions",
                 "SingularityContainer", "DockerContainer", "DockerOptions", "PexBinary", "PDMProject",
                 "PythonPackage", "PythonContainer", "UniversalPackage", "Fileset", "ModuleName", "CommandList",
                 "JobRequirements", "get_current_experiment"):
        assert hasattr(xm_cluster, name), name
    assert (xm.Sec, xm.Min, xm.Hr, xm.GB) == (1, 60, 3600, 10**9)


def test_slurm_keeps_lxm3_field_names_and_positions():
    slurm = xm_cluster.Slurm(xm_cluster.JobRequirements(cpu=2, ram=8 * xm.GB), {"qos": "low"}, 10 * xm.Min,
                             partition="debug", extra_directives=["--nice=5"], modules=["cuda"])
    assert isinstance(slurm, xhpc.Slurm)
    assert slurm.time_limit == 600 and slurm.partition == "debug" and slurm.modules == ["cuda"]
    assert slurm.directives == ["--qos=low", "--nice=5"]
    assert slurm.requirements.memory == 8 * 10**9
    assert isinstance(xm_cluster.Slurm.Spec(), xhpc.SlurmSpec)
    assert xm_cluster.Slurm(walltime=datetime.timedelta(hours=1)).time_limit == 3600


def test_grid_engine_maps_parallel_environment_and_resources():
    sge = xm_cluster.GridEngine(resources={"h_vmem": "2G"}, parallel_environments={"smp": 4}, walltime=60,
                                queue="short", max_parallel_tasks=10, reserved=True)
    assert isinstance(sge, xhpc.GridEngine)
    assert (sge.parallel_environment, sge.requirements.cpu, sge.queue) == ("smp", 4, "short")
    assert sge.resources == {"h_vmem": "2G"} and sge.max_parallel_tasks == 10 and sge.reserve is True
    with pytest.raises(ValueError, match="one parallel environment"):
        xm_cluster.GridEngine(parallel_environments={"a": 1, "b": 2})


def test_container_options_on_executors_say_where_they_go():
    with pytest.raises(ValueError, match="SingularityContainer"):
        xm_cluster.Slurm(singularity_options=xm_cluster.SingularityOptions(bind={"/d": "/d"}))


def test_singularity_options_travel_with_the_container_spec(tmp_path):
    spec = xm_cluster.SingularityContainer(
        xm_cluster.PythonPackage(xm_cluster.ModuleName("pkg.main"), path=str(tmp_path)), "/images/img.sif",
        xm_cluster.SingularityOptions(bind={"/data": "/data"}, extra_options=["--cleanenv"]))
    assert spec.binds == {"/data": "/data"} and spec.options == ("--cleanenv",)


def test_local_takes_requirements_positionally():
    import xlocal

    local = xm_cluster.Local(xm_cluster.JobRequirements(gpu=1))
    assert isinstance(local, xlocal.Local) and local.requirements.accelerator_count == 1
    assert isinstance(xm_cluster.Local.Spec(), xlocal.LocalSpec)


def test_array_job_broadcasts_a_single_entry_and_checks_lengths():
    exe = xm.Executable(name="train")
    job = xm_cluster.ArrayJob(exe, xm_cluster.Local(), args=[{"seed": 1}, {"seed": 2}], env_vars=[{"A": "1"}])
    assert [a.to_list(str) for a in job.args] == [["--seed=1"], ["--seed=2"]]
    assert job.env_vars == [{"A": "1"}, {"A": "1"}] and job.env_vars[0] is not job.env_vars[1]
    group = job.expand()
    assert list(group.jobs) == ["train_0", "train_1"]
    with pytest.raises(ValueError, match="same length"):
        xm_cluster.ArrayJob(exe, xm_cluster.Local(), args=[{}, {}], env_vars=[{}, {}, {}])


def test_array_job_runs_as_one_local_work_unit(tmp_path, monkeypatch):
    from xcore.hooks.host import reset_host

    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_QUIET", "1")
    reset_host()
    with xm_cluster.create_experiment("array", project="demo") as experiment:
        [exe] = experiment.package([xm.binary(xm_cluster.Local.Spec(), "/bin/echo")])
        unit = experiment.add(xm_cluster.ArrayJob(exe, xm_cluster.Local(), args=[{"seed": s} for s in range(3)],
                                                  env_vars=[{"T": "x"}])).result()
    jobs = experiment.wait_until_complete(timeout=60)
    assert [j.work_unit_id for j in jobs] == [unit.work_unit_id] * 3
    assert sorted(j.args for j in jobs) == [["--seed=0"], ["--seed=1"], ["--seed=2"]]
    assert experiment.context.annotations.tags == ["project:demo"]
    reset_host()


def test_unpackaged_lxm3_specs_fail_at_package_with_a_clear_error(tmp_path, monkeypatch):
    from xcore.errors import PackagingError
    from xcore.hooks.host import reset_host

    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    reset_host()
    from xcore.runtime.packaging import package

    spec = xm_cluster.PythonContainer(xm_cluster.ModuleName("pkg.main"), "python:3.11")
    with pytest.raises(PackagingError, match="PythonContainer"):
        package([xm.Packageable(spec, xm_cluster.Slurm.Spec())])
    reset_host()


@pytest.mark.infra("slurm")
@pytest.mark.parametrize("cluster", [("slurm", "local")], indirect=True, ids=["slurm-login"])
def test_lxm3_style_array_job_on_real_slurm(cluster, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "py_package").mkdir(parents=True)
    (project / "py_package" / "__init__.py").write_text("")
    (project / "py_package" / "main.py").write_text(textwrap.dedent("""
        import os, sys
        print("seed", sys.argv[1:], os.environ.get("TASK"))
    """))
    (project / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "py_package"
        version = "0.1"
    """))
    with xm_cluster.create_experiment(experiment_title="lxm3 array") as experiment:
        executor = xm_cluster.Slurm(xm_cluster.JobRequirements(cpu=1, ram=1 * xm.GB), walltime=5 * xm.Min,
                                    cluster=cluster["name"])
        spec = xm_cluster.PythonPackage(path=str(project), entrypoint=xm_cluster.ModuleName("py_package.main"))
        [executable] = experiment.package([xm.Packageable(spec, executor_spec=executor.Spec())])
        experiment.add(xm_cluster.ArrayJob(executable=executable, executor=executor,
                                           args=[{"seed": s} for s in range(3)],
                                           env_vars=[{"TASK": f"t{s}"} for s in range(3)]))
    jobs = experiment.wait_until_complete(timeout=180)
    assert [j.status for j in jobs] == [xm.Status.COMPLETED] * 3
    assert len({j.handle["job_id"] for j in jobs}) == 1  # one array submission
    from xcore.hooks.host import get_host

    host = get_host()
    logs = sorted("".join(host.job_logs(j.handle_kind, host.serializer.load(j.handle), False)).strip() for j in jobs)
    assert logs == ["seed ['--seed=0'] t0", "seed ['--seed=1'] t1", "seed ['--seed=2'] t2"]


# -- an lxm3 launcher, ported with `xcore port`, on this machine and on the real Slurm -----------

LXM3_EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lxm3_cluster"


def _xcore(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False, cwd=cwd, env={**os.environ, "XCORE_QUIET": "1"})


def _ported_example(tmp_path: Path) -> Path:
    import shutil

    work = tmp_path / "lxm3_example"
    shutil.copytree(LXM3_EXAMPLE, work)
    ported = _xcore("port", "--write", "launcher.py", cwd=work)
    assert ported.returncode == 0, ported.stderr
    assert "from xhpc import xm_cluster" in (work / "launcher.py").read_text()
    return work


def _task_outputs(experiment_id: str, cwd: Path) -> list[str]:
    import json

    shown = json.loads(_xcore("show", experiment_id, "--json", cwd=cwd).stdout)
    [unit] = shown["work_units"]
    return sorted(_xcore("logs", f"{experiment_id}/{unit['id']}", "--job", job["name"], cwd=cwd).stdout.strip()
                  for job in unit["jobs"])


def test_ported_lxm3_launcher_runs_locally(tmp_path, monkeypatch):
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    work = _ported_example(tmp_path)
    result = _xcore("launch", "--wait", "launcher.py", "--", "--seeds=3", cwd=work)
    assert result.returncode == 0, result.stderr
    assert _task_outputs("1", work) == [
        "['--seed=0'] task-0", "['--seed=1'] task-1", "['--seed=2'] task-2"]


@pytest.mark.infra("slurm")
@pytest.mark.parametrize("cluster", [("slurm", "local")], indirect=True, ids=["slurm-login"])
def test_ported_lxm3_launcher_runs_on_real_slurm(cluster, tmp_path: Path) -> None:
    work = _ported_example(tmp_path)
    result = _xcore("launch", "--wait", "launcher.py", "--", "--seeds=2", "--launch_on_cluster", cwd=work)
    assert result.returncode == 0, result.stderr
    assert _task_outputs("1", work) == ["['--seed=0'] task-0", "['--seed=1'] task-1"]
