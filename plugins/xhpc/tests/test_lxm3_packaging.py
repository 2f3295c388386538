"""lxm3's PexBinary, PDMProject and DockerContainer specs: built for real (pex, pdm, docker),
then run as jobs on the real Slurm and Grid Engine with hostile arguments and environment."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import require_service
from xcore.testing.contract import HOSTILE_ARGS, HOSTILE_ENV
from xhpc import scripts, xm_cluster

HOST = socket.gethostname()  # the Slurm and SGE node here; a Docker container has its own name
BIN = Path(sys.executable).parent  # pex and pdm are installed next to the tests' Python

# The program every job runs: it prints what it received as one JSON line.
PROBE = textwrap.dedent("""\
    import json, os, socket, sys
    extra = ""
    if os.path.exists("data.txt"):
        extra = open("data.txt").read().strip()
    try:
        import helperlib
        extra += helperlib.greet()
    except ImportError:
        pass
    print(json.dumps({"argv": sys.argv[1:], "env": os.environ.get("XCORE_PROBE_ENV"), "extra": extra,
                      "host": socket.gethostname()}))
""")


def _pex_project(root: Path) -> Path:
    project = root / "pex proj"  # a space: paths are passed as argv, never pasted into shell text
    (project / "py_package").mkdir(parents=True)
    (project / "py_package" / "__init__.py").write_text("")
    (project / "py_package" / "main.py").write_text(PROBE)
    (project / "data.txt").write_text("shipped-data\n")
    return project


def _pex_spec(project: Path) -> xm_cluster.PexBinary:
    data = xm_cluster.Fileset({str(project / "data.txt"): "data.txt"})
    return xm_cluster.PexBinary(xm_cluster.ModuleName("py_package.main"), path=str(project),
                                packages=["py_package"], dependencies=[data])


def _pdm_project(root: Path, dependencies: bool = True) -> Path:
    """A PDM project whose one locked dependency (a local project) exists nowhere on the cluster."""
    helper = root / "helperlib"
    (helper / "helperlib").mkdir(parents=True)
    (helper / "helperlib" / "__init__.py").write_text("def greet():\n    return '+helped'\n")
    (helper / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "helperlib"\nversion = "1.0"\n')
    project = root / "pdm_app"
    (project / "src" / "pdm_app").mkdir(parents=True)
    (project / "src" / "pdm_app" / "__init__.py").write_text("")
    (project / "src" / "pdm_app" / "main.py").write_text(PROBE)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "pdm-app"\nversion = "0.1"\nrequires-python = ">=3.9"\n'
        + (f'dependencies = ["helperlib @ {helper.as_uri()}"]\n' if dependencies else "")
        + '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    env = {**os.environ, "PDM_USE_VENV": "false", "PDM_PYTHON": sys.executable, "PDM_CHECK_UPDATE": "false"}
    locked = subprocess.run([str(BIN / "pdm"), "lock"], cwd=project, env=env, capture_output=True, text=True,
                            timeout=300)
    assert locked.returncode == 0, locked.stderr
    return project


def _tools() -> None:
    for tool in ("pex", "pdm"):
        require_service(tool, lambda t=tool: (BIN / t).exists() or shutil.which(t) is not None,
                        "pip install pex 'pdm[locked]' into the test environment (scripts/test.sh does)")


def _package(spec: object, cache: Path) -> object:
    from xcore.testing import make_packaging_context
    from xhpc import packaging

    return packaging.package(xm.Packageable(spec, xm_cluster.Slurm.Spec()), make_packaging_context(cache))


def _names(executable: object) -> set[str]:
    with tarfile.open(executable.artifacts[0].local_path) as tar:  # type: ignore[attr-defined]
        return set(tar.getnames())


def _path_with_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")


# -- packaging, without a cluster ----------------------------------------------------------


def test_pex_binary_is_built_with_pex_and_runs_from_its_package_dir(tmp_path, monkeypatch):
    _tools()
    _path_with_tools(monkeypatch)
    project = _pex_project(tmp_path)
    executable = _package(_pex_spec(project), tmp_path / "cache")
    assert executable.command == ["./pex_proj.pex"] and executable.cwd_in_package  # lxm3: NAME from the path
    assert _names(executable) == {"pex_proj.pex", "data.txt"}
    unpacked = tmp_path / "unpacked"
    shutil.unpack_archive(executable.artifacts[0].local_path, unpacked, format="gztar")
    ran = subprocess.run([*executable.command, *HOSTILE_ARGS], cwd=unpacked, capture_output=True, text=True,
                         env={**os.environ, "XCORE_PROBE_ENV": HOSTILE_ENV}, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"argv": HOSTILE_ARGS, "env": HOSTILE_ENV, "extra": "shipped-data", "host": HOST}
    again = _package(_pex_spec(project), tmp_path / "cache")  # unchanged project: no rebuild, same archive
    assert again.artifacts == executable.artifacts


def test_pdm_project_ships_its_locked_dependencies(tmp_path, monkeypatch):
    _tools()
    _path_with_tools(monkeypatch)
    project = _pdm_project(tmp_path)
    spec = xm_cluster.PDMProject(xm_cluster.ModuleName("pdm_app.main"), base_image=None, path=str(project))
    executable = _package(spec, tmp_path / "cache")
    names = _names(executable)
    assert {"helperlib/__init__.py", "pdm_app/main.py"} <= names
    assert executable.command == ["python3", "-m", "pdm_app.main"] and executable.container is None
    in_image = _package(xm_cluster.PDMProject(xm_cluster.ModuleName("pdm_app.main"), "python:3.11-slim",
                                              path=str(project)), tmp_path / "cache")
    assert in_image.container.image == "docker://python:3.11-slim" and in_image.container.runtime == "singularity"
    (project / "pdm.lock").unlink()
    from xcore.errors import PackagingError

    with pytest.raises(PackagingError, match="pdm lock"):
        _package(xm_cluster.PDMProject(xm_cluster.ModuleName("pdm_app.main"), None, path=str(project)),
                 tmp_path / "cache2")


def test_pdm_project_without_dependencies_on_a_local_image(tmp_path, monkeypatch):
    """No locked dependency: nothing for pip to install. A local .sif base image is uploaded with the package."""
    _tools()
    _path_with_tools(monkeypatch)
    project = _pdm_project(tmp_path, dependencies=False)
    image = tmp_path / "base.sif"
    image.write_bytes(b"not really an image")
    executable = _package(xm_cluster.PDMProject(xm_cluster.ModuleName("pdm_app.main"), str(image), path=str(project)),
                          tmp_path / "cache")
    assert "pdm_app/main.py" in _names(executable) and not any(n.startswith("helperlib") for n in _names(executable))
    [package, sif] = executable.artifacts
    assert sif.kind == "file" and executable.container.image == f"artifact:{sif.sha256}"


def test_docker_container_wraps_the_package_in_docker_run(tmp_path, monkeypatch):
    _tools()
    _path_with_tools(monkeypatch)
    project = _pex_project(tmp_path)
    options = xm_cluster.DockerOptions(volumes={"/scratch,x": "/data"}, extra_options=["--network=none"])
    executable = _package(xm_cluster.DockerContainer(_pex_spec(project), "xcore-python:3.11", options),
                          tmp_path / "cache")
    assert executable.container.runtime == "docker" and executable.container.image == "xcore-python:3.11"
    argv = scripts.docker_command("img", ["./x.pex"], ["/st/artifacts/abc"], {"/scratch,x": "/data"},
                                  ["--network=none"], True, "/st/artifacts/abc", ["PYTHONPATH", "SECRET"])
    assert argv[:6] == ["/bin/sh", "-c", scripts.DOCKER_WRAPPER, "docker", "--rm", "--init"]
    assert argv[6:] == [
        "--mount", "type=bind,source=/st/artifacts/abc,target=/st/artifacts/abc",
        "--mount", 'type=bind,"source=/scratch,x",target=/data',
        "--env", "PYTHONPATH", "--env", "SECRET",  # by name: values never reach a command line
        "--runtime=nvidia", "--env", "NVIDIA_VISIBLE_DEVICES",
        "--workdir", "/st/artifacts/abc", "--network=none", "img", "./x.pex"]


def test_executor_docker_options_say_where_they_go():
    with pytest.raises(ValueError, match=r"DockerContainer\(entrypoint, image, DockerOptions"):
        xm_cluster.GridEngine(docker_options=xm_cluster.DockerOptions())


# -- real jobs on the real schedulers ------------------------------------------------------


def _run_job(spec: object, executor: object) -> dict:
    from xcore.hooks.host import get_host

    with xm.create_experiment("lxm3 packaging") as experiment:
        [executable] = experiment.package([xm.Packageable(spec, executor_spec=executor.Spec())])
        experiment.add(xm.Job(executable, executor, args=list(HOSTILE_ARGS),
                              env_vars={"XCORE_PROBE_ENV": HOSTILE_ENV}))
    [job] = experiment.wait_until_complete(timeout=240)
    host = get_host()
    log = "".join(host.job_logs(job.handle_kind, host.serializer.load(job.handle), False))
    assert job.status is xm.Status.COMPLETED, log
    return json.loads(log.strip().splitlines()[-1])


def _executor(cluster: dict[str, str]) -> object:
    if cluster["scheduler"] == "sge":
        return xm_cluster.GridEngine(xm_cluster.JobRequirements(cpu=1), walltime=5 * xm.Min, cluster=cluster["name"])
    return xm_cluster.Slurm(xm_cluster.JobRequirements(cpu=1), walltime=5 * xm.Min, cluster=cluster["name"])


SSH = pytest.mark.parametrize("cluster", [("slurm", "ssh"), ("sge", "ssh")], indirect=True,
                              ids=["slurm-ssh", "sge-ssh"])  # over SSH, as a user submits from a laptop


@pytest.mark.infra("slurm")
@SSH
def test_pex_binary_job_round_trips_hostile_arguments(cluster, tmp_path, monkeypatch):
    _tools()
    _path_with_tools(monkeypatch)
    received = _run_job(_pex_spec(_pex_project(tmp_path)), _executor(cluster))
    assert received == {"argv": HOSTILE_ARGS, "env": HOSTILE_ENV, "extra": "shipped-data", "host": HOST}


@pytest.mark.infra("slurm")
@SSH
def test_pdm_project_job_runs_with_its_locked_dependencies(cluster, tmp_path, monkeypatch):
    _tools()
    _path_with_tools(monkeypatch)
    spec = xm_cluster.PDMProject(xm_cluster.ModuleName("pdm_app.main"), None, path=str(_pdm_project(tmp_path)))
    received = _run_job(spec, _executor(cluster))
    assert received == {"argv": HOSTILE_ARGS, "env": HOSTILE_ENV, "extra": "+helped", "host": HOST}


def _docker_up() -> bool:
    try:
        return subprocess.run(["docker", "image", "inspect", "xcore-python:3.11"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.infra("slurm")
@pytest.mark.parametrize("cluster", [("slurm", "local")], indirect=True, ids=["slurm-login"])
def test_docker_container_job_runs_in_docker_on_slurm(cluster, tmp_path, monkeypatch):
    """The Slurm node here has the real dockerd; jobs submitted from the login node (root) may use
    it (over SSH the user ``xcore`` may not, as on many clusters)."""
    _tools()
    _path_with_tools(monkeypatch)
    require_service("docker", _docker_up, "run `bash scripts/infra/setup.sh docker` as root")
    spec = xm_cluster.DockerContainer(_pex_spec(_pex_project(tmp_path)), "xcore-python:3.11")
    received = _run_job(spec, _executor(cluster))
    assert received.pop("host") != HOST  # a container of its own
    assert received == {"argv": HOSTILE_ARGS, "env": HOSTILE_ENV, "extra": "shipped-data"}


def _containers_running(token: str) -> bool:
    listed = subprocess.run(["docker", "ps", "--no-trunc", "--format", "{{.Command}}"], capture_output=True,
                            text=True, timeout=30)
    return token in listed.stdout


def _poll(condition: object, timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.5)
    return False


@pytest.mark.infra("slurm")
@pytest.mark.parametrize("cluster", [("slurm", "local")], indirect=True, ids=["slurm-login"])
def test_cancelling_a_docker_container_job_stops_its_container(cluster, tmp_path, monkeypatch):
    """scancel signals the docker CLI, which passes the signal on; --init makes the program (not
    an init-less PID 1 that ignores SIGTERM) receive it, so no container outlives its job."""
    import uuid

    _tools()
    _path_with_tools(monkeypatch)
    require_service("docker", _docker_up, "run `bash scripts/infra/setup.sh docker` as root")
    project = _pex_project(tmp_path)
    (project / "py_package" / "main.py").write_text("import time\ntime.sleep(600)\n")
    token = f"xmc-{uuid.uuid4().hex[:12]}"
    executor = _executor(cluster)
    with xm.create_experiment("docker cancel") as experiment:
        [executable] = experiment.package([xm.Packageable(
            xm_cluster.DockerContainer(_pex_spec(project), "xcore-python:3.11"), executor_spec=executor.Spec())])
        experiment.add(xm.Job(executable, executor, args=[token]))
    try:
        assert _poll(lambda: _containers_running(token), 120), "the job's container never started"
        cancelled = subprocess.run([sys.executable, "-m", "xcore.cli.main", "cancel", str(experiment.experiment_id)],
                                   capture_output=True, text=True, timeout=120)
        assert cancelled.returncode == 0, cancelled.stderr
        assert _poll(lambda: not _containers_running(token), 60), "the container outlived its cancelled job"
    finally:
        leftover = subprocess.run(["docker", "ps", "--filter", "ancestor=xcore-python:3.11", "--no-trunc",
                                   "--format", "{{.ID}} {{.Command}}"], capture_output=True, text=True, timeout=30)
        for line in leftover.stdout.splitlines():
            if token in line:  # only this test's container
                subprocess.run(["docker", "rm", "-f", line.split()[0]], capture_output=True, timeout=60)


# An lxm3 launcher in the shape of lxm3's pex_binary example (written here, for lxm3's API).
LXM3_PEX_LAUNCHER = textwrap.dedent('''\
    from absl import app, flags
    from lxm3 import xm
    from lxm3 import xm_cluster

    _LAUNCH_ON_CLUSTER = flags.DEFINE_boolean('launch_on_cluster', False, 'Submit to the cluster.')


    def main(_):
        with xm_cluster.create_experiment(experiment_title='pex') as experiment:
            requirements = xm_cluster.JobRequirements(ram=1 * xm.GB)
            if _LAUNCH_ON_CLUSTER.value:
                executor = xm_cluster.Slurm(requirements, walltime=10 * xm.Min)
            else:
                executor = xm_cluster.Local(requirements)
            resource = xm_cluster.Fileset({'data.txt': 'data.txt'})
            data_path = resource.get_path('data.txt', executor.Spec())
            spec = xm_cluster.PexBinary(entrypoint=xm_cluster.ModuleName('py_package.main'), path='.',
                                        packages=['py_package'], dependencies=[resource])
            [executable] = experiment.package([xm.Packageable(spec, executor_spec=executor.Spec())])
            experiment.add(xm.Job(executable=executable, executor=executor, args={'seed': 1, 'data': data_path}))


    if __name__ == '__main__':
        app.run(main)
''')


@pytest.mark.infra("slurm")
@pytest.mark.parametrize("cluster", [("slurm", "ssh")], indirect=True, ids=["slurm-ssh"])
def test_ported_lxm3_pex_launcher_runs_on_slurm(cluster, tmp_path, monkeypatch):
    _tools()
    _path_with_tools(monkeypatch)
    project = _pex_project(tmp_path)
    (project / "launcher.py").write_text(LXM3_PEX_LAUNCHER)

    def xcore(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                              timeout=300, cwd=project, env={**os.environ, "XCORE_QUIET": "1"})

    ported = xcore("port", "--write", "launcher.py")
    assert ported.returncode == 0, ported.stderr
    launched = xcore("launch", "--wait", "launcher.py", "--", "--launch_on_cluster")
    assert launched.returncode == 0, launched.stderr
    received = json.loads(xcore("logs", "1/1").stdout.strip().splitlines()[-1])
    assert received == {"argv": ["--seed=1", "--data=data.txt"], "env": None, "extra": "shipped-data", "host": HOST}
