"""What an unchanged relaunch costs (issue 14): the project is not read again, only stat'ed,
and the submission runs a handful of processes on the cluster, counted for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import make_packaging_context, require_service
from xhpc_helpers import HOW, cluster_toml, service_up


def _package(project: Path, cache_dir: Path) -> tuple[str, int]:
    """Package ``project`` as a new CLI process would (no digest held in memory): the package's
    sha256 and how many files were read to fingerprint the project."""
    import xhpc
    from xcore.plugin import DigestCache
    from xhpc import packaging

    packaging._DIGESTS = DigestCache()  # what a new process starts with
    exe = packaging.package(xm.python_module(xhpc.Slurm.Spec(), "app.main", path=str(project)),
                            make_packaging_context(cache_dir))
    assert exe is not None and exe.package is not None
    return exe.package, packaging._DIGESTS.misses


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "main.py").write_text("print('version 1')\n" + "# padding\n" * 1000)
    return root


def test_unchanged_relaunch_reads_no_file_and_an_edit_of_the_same_size_is_seen(
        project: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, read = _package(project, cache)
    assert read == 2  # __init__.py, main.py
    assert (cache / "xhpc" / "digests.json").stat().st_mode & 0o077 == 0  # private, like the cache dir

    assert _package(project, cache) == (first, 0)  # a new process reuses the saved fingerprints

    main = project / "app" / "main.py"
    before = main.stat()
    main.write_text(main.read_text().replace("version 1", "version 2"))  # same size...
    os.utime(main, ns=(before.st_atime_ns, before.st_mtime_ns))  # ...and the same mtime
    assert main.stat().st_size == before.st_size and main.stat().st_mtime_ns == before.st_mtime_ns
    changed, read = _package(project, cache)
    assert read == 1  # only the edited file is read again (its ctime moved)
    assert changed != first


def test_a_link_out_of_a_python_package_is_still_refused(project: Path, tmp_path: Path) -> None:
    """The link check now rides on the fingerprint's walk of the tree: it still stops the launch."""
    import xhpc
    from xcore.plugin import Packageable, PackagingError
    from xhpc import packaging

    (project / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\n')
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the cluster")
    (project / "app" / "leak.txt").symlink_to(secret)
    context = make_packaging_context(tmp_path / "cache")
    spec = xhpc.PythonPackage(xm.ModuleName("app.main"), path=str(project))
    with pytest.raises(PackagingError, match="leak.txt"):
        packaging.package(Packageable(spec, xhpc.Slurm.Spec()), context)


COUNTED = ("mkdir", "chmod", "tar", "gzip", "mv", "rm", "rmdir", "mktemp", "tail", "tr", "cat", "pwd", "sbatch")


def test_a_relaunch_runs_few_processes_on_the_cluster(xcore_env: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Login-node mode runs the very script the SSH mode sends; wrappers log each program it
    starts. An unchanged relaunch: mkdir, tar, mv (run files), mkdir (claim), sbatch, mv (id)."""
    require_service("slurm", lambda: service_up("slurm"), HOW)
    import xhpc

    log = tmp_path / "programs.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in COUNTED:
        real = shutil.which(name)
        assert real, name
        (bindir / name).write_text(f'#!/bin/sh\necho {name} >> {log}\nexec {real} "$@"\n')
        (bindir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "slurm", "local", str(xcore_env / "staging")))
    name = f"relaunch-cost-{os.getpid()}"
    (tmp_path / "proj" / "app").mkdir(parents=True)
    (tmp_path / "proj" / "app" / "main.py").write_text("print(1)\n")

    def launch() -> list[str]:
        log.unlink(missing_ok=True)
        with xm.create_experiment(title="relaunch cost") as experiment:
            [exe] = experiment.package([xm.python_module(xhpc.Slurm.Spec(), "app.main",
                                                         path=str(tmp_path / "proj"))])
            executor = xhpc.Slurm(cluster="test", job_name=name, directives=["--hold"])
            for i in range(3):
                experiment.add(xm.Job(exe, executor, args={"seed": i, "text": "it's $HOME\n`x`"}))
        return log.read_text().split() if log.exists() else []

    try:
        launch()  # the first launch prepares the staging directory and uploads the package
        programs = launch()
        assert programs.count("sbatch") == 1, programs
        assert len(programs) <= 6, f"an unchanged relaunch ran {len(programs)} programs: {programs}"
        jobs = subprocess.run(["squeue", "-h", "--name", name, "-o", "%F"], capture_output=True, text=True,
                              check=True).stdout.split()
        assert len(set(jobs)) == 2  # one array job per launch
        run_dirs = sorted((xcore_env / "staging" / "runs").iterdir())
        assert [p.name for p in run_dirs if ".in." in p.name] == []  # nothing left aside
        for run in run_dirs:
            assert sorted(p.name for p in run.iterdir()) == [
                "cancelled", "chunk-0.claim", "chunk-0.id", "job.sh", "logs", "tasks.bin", "xcore-jobs.json"]
            assert run.stat().st_mode & 0o077 == 0
            assert b"it's $HOME\n`x`" in (run / "tasks.bin").read_bytes()
    finally:
        subprocess.run(["scancel", f"--name={name}"], capture_output=True, check=False)
