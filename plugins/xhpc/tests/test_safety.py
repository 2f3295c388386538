"""Hostile input and leaks (issue 13): scheduler fields that would inject directives, files on the
cluster readable by other users, and symlinks that would ship files from outside a project."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

import xcore as xm
from xcore.errors import PackagingError
from xhpc import scripts
from xhpc.executors import GridEngine, Slurm
from xhpc_helpers import executor_class

# -- 13: every field that reaches a directive is validated at construction ------------------------

INJECTIONS = ["debug --output=/tmp/pwned", "debug\n#SBATCH --uid=0", "a b", "x\ntouch /tmp/pwned", "'q'",
              "$(id)", "`id`", "x;id", "x#y", "-x", "", "x\ry", "x\0y", "x\ty"]


@pytest.mark.parametrize("field", ["partition", "account", "qos", "constraint", "gpu_type"])
@pytest.mark.parametrize("value", INJECTIONS)
def test_hostile_slurm_fields_are_refused(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=rf"Slurm\({field}=.*(not allowed|must be)"):
        Slurm(**{field: value})


@pytest.mark.parametrize("field", ["queue", "project", "parallel_environment", "memory_resource", "gpu_resource",
                                   "account"])
@pytest.mark.parametrize("value", INJECTIONS)
def test_hostile_sge_fields_are_refused(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=rf"GridEngine\({field}=.*(not allowed|must be)"):
        GridEngine(**{field: value})


@pytest.mark.parametrize("resources", [
    {"h_vmem\n#$ -l x": "1G"}, {"tmp free": "1G"}, {"a=b": "1"}, {"x": "1G -q other.q"}, {"x": "1\ntouch /tmp/p"},
    {"x": "$(id)"}, {"x": ""}, {"x": None}, {1: "2"}, {"x": "a'b"},
])
def test_hostile_sge_resources_are_refused(resources: dict) -> None:
    with pytest.raises(ValueError, match=r"GridEngine\(resources="):
        GridEngine(resources=resources)


@pytest.mark.parametrize("cls", [Slurm, GridEngine])
@pytest.mark.parametrize("directives", [["--mail-type=END\n#SBATCH --uid=0"], ["touch /tmp/pwned"], [""],
                                        ["-m e\rx"], ["-x\0"]])
def test_hostile_directives_are_refused(cls: type, directives: list[str]) -> None:
    with pytest.raises(ValueError, match=r"directives=.*one line"):
        cls(directives=directives)


@pytest.mark.parametrize("cls", [Slurm, GridEngine])
@pytest.mark.parametrize("name", ["a\nb", "", "x\x1b[31m", 5])
def test_hostile_job_names_are_refused(cls: type, name: object) -> None:
    with pytest.raises(ValueError, match=r"job_name="):
        cls(job_name=name)


@pytest.mark.parametrize("cls", [Slurm, GridEngine])
@pytest.mark.parametrize("module", ["cuda 12", "-f", "x;id", "$(id)", "a\nb", ""])
def test_hostile_module_names_are_refused(cls: type, module: str) -> None:
    with pytest.raises(ValueError, match=r"modules=.*not a module name"):
        cls(modules=["gcc/11", module])


def test_cluster_defaults_are_validated_too() -> None:
    from xcore.errors import ConfigurationError
    from xhpc.executors import with_defaults

    with pytest.raises(ConfigurationError, match=r"\[defaults\].*partition="):
        with_defaults(Slurm(local=True), {"partition": "debug --uid=0"})


def test_legitimate_values_render() -> None:
    slurm = Slurm(requirements=xm.JobRequirements(a100=2), partition="gpu,gpu-long", account="lab.ai", qos="high",
                  constraint="[ib&v100|a100]*2", gpu_type="a100", job_name="my sweep/1",
                  directives=["--mail-type=END", "#SBATCH --mail-user=a@b.example"],
                  modules=["cuda/12.1", "gcc@11.2", "python/3.11-foss+mkl", "a:b,c"])
    lines = scripts.slurm_directives(slurm, slurm.job_name, "/s/r")
    for expected in ("--gres=gpu:a100:2", "--partition=gpu,gpu-long", "--account=lab.ai", "--qos=high",
                     "--constraint=[ib&v100|a100]*2", "--mail-type=END", "--mail-user=a@b.example",
                     "--job-name=my_sweep_1"):
        assert f"#SBATCH {expected}" in lines
    sge = GridEngine(requirements=xm.JobRequirements(cpu=2, memory=xm.GiB), queue="gpu.q@node-1,all.q",
                     parallel_environment="mpi*", memory_resource="h_vmem", gpu_resource="gpu",
                     resources={"tmpfree": "10G", "hostname": "node1|node2", "arch": "lx-amd64", "slots_x": 2},
                     directives=["-m e -M a@b.example"])
    lines = scripts.sge_directives(sge, "n", "/s/r")
    for expected in ("-q gpu.q@node-1,all.q", "-pe mpi* 2", "-l h_vmem=512M", "-l tmpfree=10G",
                     "-l hostname=node1|node2", "-l arch=lx-amd64", "-l slots_x=2", "-m e -M a@b.example"):
        assert f"#$ {expected}" in lines


def _run_one(executor: object, Ex: type, title: str) -> object:
    import xhpc

    with xm.create_experiment(title=title) as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(['echo "ran $1"']), Ex.Spec())])
        experiment.add(xm.Job(exe, executor, args=["ok"]))
    [job] = experiment.wait_until_complete(timeout=300)
    return job


def test_legitimate_values_work_on_the_real_scheduler(cluster: dict[str, str]) -> None:
    """Comma lists, accounts, QOS, parallel environments and complex names still reach the real scheduler."""
    Ex = executor_class(cluster)
    if Ex is Slurm:
        executor = Slurm(partition="debug,short", account="xcore", qos="normal", time_limit="2m",
                         directives=["--comment=xcore-safety"], job_name="safety values")
    else:
        executor = GridEngine(requirements=xm.JobRequirements(cpu=1, memory=512 * xm.MiB), queue="all.q",
                              parallel_environment="smp", memory_resource="h_vmem",
                              resources={"h_rt": "120"}, directives=["-m n"], job_name="safety values")
    job = _run_one(executor, Ex, "legit")
    assert job.status is xm.Status.COMPLETED, job.message


# -- 10: nothing xcore writes on the cluster is readable by other users --------------------------


def _walk(root: Path) -> list[Path]:
    out = [root]
    for dirpath, dirnames, filenames in os.walk(root):
        out += [Path(dirpath) / n for n in dirnames + filenames]
    return out


def test_cluster_files_are_private(cluster: dict[str, str], tmp_path: Path) -> None:
    """After a job with secrets in its environment ran: every directory 0700, every file 0600 (or
    0700), and user ``nobody`` cannot read tasks.bin, the job script, the logs or the package."""
    Ex = executor_class(cluster)

    project = tmp_path / "proj"
    (project / "leaky").mkdir(parents=True)
    (project / "leaky" / "__init__.py").write_text("")
    (project / "leaky" / "main.py").write_text(
        "import os\nprint('token', os.environ['WANDB_API_KEY'][-4:])\nopen('written.txt', 'w').write('out')\n")
    secret = "wandb-secret-value-1234"
    with xm.create_experiment(title="private") as experiment:
        [exe] = experiment.package([xm.python_module(Ex.Spec(), "leaky.main", path=str(project),
                                                     env_vars={"WANDB_API_KEY": secret})])
        experiment.add(xm.Job(exe, Ex(), args=["a"], env_vars={"AWS_SECRET_ACCESS_KEY": "aws-secret"}))
    [job] = experiment.wait_until_complete(timeout=300)
    assert job.status is xm.Status.COMPLETED, job.message

    staging = Path(cluster["staging"])
    paths = _walk(staging)
    names = {p.name for p in paths}
    for expected in ("tasks.bin", "job.sh", "0.log", "chunk-0.id", "written.txt", "main.py"):
        assert expected in names, (expected, sorted(names))
    assert any(n.endswith(".tar.gz") for n in names), names  # the uploaded package archive
    assert any(n.startswith(("slurm-", "sge-")) for n in names), names  # the scheduler's own log
    loose = [f"{oct(p.lstat().st_mode & 0o777)} {p}" for p in paths if p.lstat().st_mode & 0o077]
    assert not loose, "readable by group/others:\n" + "\n".join(loose)
    for p in paths:
        mode = p.lstat().st_mode
        assert not stat.S_ISLNK(mode), p
        if stat.S_ISDIR(mode):
            assert mode & 0o700 == 0o700, p
    secrets_file = next(p for p in paths if p.name == "tasks.bin")
    assert secret.encode() in secrets_file.read_bytes()
    for p in paths:
        if p.is_file() and (p.name in ("tasks.bin", "job.sh", "0.log", "written.txt", "main.py")
                            or p.name.endswith(".tar.gz")):
            read = subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(p)], capture_output=True)
            assert read.returncode != 0 and secret.encode() not in read.stdout, p
    listing = subprocess.run(["runuser", "-u", "nobody", "--", "ls", str(staging / "runs")], capture_output=True)
    assert listing.returncode != 0


# -- 12: symlinks that leave a project are refused -------------------------------------------------


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "main.py").write_text("print('hi')\n")
    (project / "pyproject.toml").write_text(
        '[project]\nname = "pkg"\nversion = "0.1"\n[build-system]\nrequires = ["setuptools"]\n'
        'build-backend = "setuptools.build_meta"\n[tool.setuptools]\npackages = ["pkg"]\n'
        '[tool.setuptools.package-data]\npkg = ["*"]\n')
    return project


def _package(project: Path, spec_kind: str) -> object:
    import xhpc
    from xcore.model.execution import PackagingContext
    from xcore.progress import Progress
    from xhpc import packaging

    if spec_kind == "package":
        spec = xhpc.PythonPackage(xm.ModuleName("pkg.main"), path=str(project))
    else:
        spec = xm.python_module(xhpc.Slurm.Spec(), "pkg.main", path=str(project)).executable_spec
    context = PackagingContext(project.parent / "cache", Progress(enabled=False))
    return packaging.package(xm.Packageable(spec, xhpc.Slurm.Spec()), context)


def _archive_names(executable: object) -> list[str]:
    import tarfile

    with tarfile.open(executable.artifacts[0].local_path) as tar:
        return tar.getnames()


@pytest.mark.parametrize("target", ["/etc/shadow", "/etc"])
def test_python_package_refuses_links_leaving_the_project(tmp_path: Path, xcore_env: Path, target: str) -> None:
    project = _project(tmp_path)
    (project / "pkg" / "leak").symlink_to(target)
    with pytest.raises(PackagingError, match=r"outside.*pkg/leak"):
        _package(project, "package")


@pytest.mark.parametrize("target", ["/etc/shadow", "/etc"])
def test_python_module_skips_links_leaving_the_project_with_a_warning(
        tmp_path: Path, xcore_env: Path, target: str, caplog: pytest.LogCaptureFixture) -> None:
    project = _project(tmp_path)
    (project / "pkg" / "leak").symlink_to(target)
    with pytest.warns(UserWarning, match=r"outside.*pkg/leak"):
        executable = _package(project, "module")
    names = _archive_names(executable)
    assert "pkg/main.py" in names and not any(n.startswith("pkg/leak") for n in names), names


@pytest.mark.parametrize("kind", ["package", "module"])
def test_links_inside_the_project_still_work(tmp_path: Path, xcore_env: Path, kind: str) -> None:
    project = _project(tmp_path)
    (project / "data").mkdir()
    (project / "data" / "table.csv").write_text("a,b\n")
    (project / "pkg" / "table.csv").symlink_to("../data/table.csv")
    (project / "pkg" / "alias.py").symlink_to("main.py")
    (project / "pkg" / "tables").symlink_to("../data", target_is_directory=True)
    (project / "pkg" / "loop").symlink_to("..", target_is_directory=True)  # a cycle is not followed
    names = _archive_names(_package(project, kind))
    assert "pkg/table.csv" in names and "pkg/alias.py" in names, names
    if kind == "module":  # python_module ships the tree; pip ships only what setuptools selects
        assert "pkg/tables/table.csv" in names and not any("loop" in n for n in names), names


# -- 18: the HPC benchmark cancels only the jobs it submitted --------------------------------------


def _ssh(command: str) -> subprocess.CompletedProcess:
    from xhpc_helpers import KNOWN_HOSTS, SSH_KEY

    return subprocess.run(["ssh", "-p", "2222", "-i", SSH_KEY, "-o", f"UserKnownHostsFile={KNOWN_HOSTS}",
                           "-o", "BatchMode=yes", "xcore@127.0.0.1", command], capture_output=True, text=True,
                          timeout=60)


def _load_bench() -> object:
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "bench" / "bench_hpc.py"
    spec = importlib.util.spec_from_file_location("bench_hpc_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("scheduler", ["slurm", "sge"])
def test_bench_cancels_only_its_own_jobs(scheduler: str) -> None:
    """A job of the same user that the benchmark did not submit survives the benchmark's cleanup."""
    import time
    import uuid

    from xcore.testing import require_service
    from xhpc_helpers import HOW, service_up

    require_service(scheduler, lambda: service_up(scheduler), HOW)
    require_service("sshd", lambda: service_up("sshd"), HOW)
    bench = _load_bench()
    bystander_name = f"bystander-{uuid.uuid4().hex[:8]}"
    if scheduler == "slurm":
        submit = "sbatch --parsable -J {} -o /dev/null --wrap 'sleep 120'"
        alive = "squeue -h -j {} -o %T"
    else:
        submit = "cd /tmp && qsub -terse -N {} -o /dev/null -j y -b y sleep 120"
        alive = "qstat -j {} >/dev/null 2>&1 && echo ALIVE"
    ids = {}
    for name in (bystander_name, bench.BENCH_NAME):
        out = _ssh(submit.format(name))
        assert out.returncode == 0, out.stderr
        ids[name] = out.stdout.strip().split(";")[0]
    try:
        bench.cancel_own(scheduler)
        deadline = time.monotonic() + 90
        while True:
            own = _ssh(alive.format(ids[bench.BENCH_NAME])).stdout.strip()
            if own in ("", "CANCELLED") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert own in ("", "CANCELLED"), f"the benchmark's own job is still {own!r}"
        other = _ssh(alive.format(ids[bystander_name])).stdout.strip()
        assert other in ("PENDING", "RUNNING", "ALIVE"), f"the bystander job was cancelled: {other!r}"
    finally:
        _ssh(f"{'scancel' if scheduler == 'slurm' else 'qdel'} {' '.join(ids.values())} >/dev/null 2>&1")
