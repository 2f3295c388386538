"""Release: what `pip install xcore-xhpc` gets from the built wheels alone, in a fresh environment.

The wheels are built from this checkout (scripts/release.py, as `nox -s build` does) and
installed without `-e`, so a module missing from a wheel, a plugin still depending on the core's
old distribution name, or an entry point lost in packaging fails here and not on a user's machine.
Third-party dependencies come from the package index; `xcore-*` never does.
"""

from __future__ import annotations

import email
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from core_helpers import REPO

pytestmark = pytest.mark.slow

_spec = importlib.util.spec_from_file_location("xcore_release", REPO / "scripts" / "release.py")
assert _spec and _spec.loader
release = importlib.util.module_from_spec(_spec)
sys.modules["xcore_release"] = release  # dataclasses look their module up while the class is built
_spec.loader.exec_module(release)

BUILT = ["xcore-core", "xcore-xlocal", "xcore-xhpc"]


def run(argv: list[str | Path], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, **kwargs)
    command = " ".join(map(str, argv))
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    run([sys.executable, REPO / "scripts" / "release.py", "--wheel-only", "--no-isolation", out, *BUILT])
    return out


def requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(archive.read(meta)).get_all("Requires-Dist") or []


def test_xhpc_installs_from_the_wheelhouse_into_a_fresh_venv(wheelhouse: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv])  # this pip installs into it: seconds saved
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "--disable-pip-version-check",
           "install", "--quiet"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"XCORE_HOME": str(tmp_path / "home"), "XCORE_CONFIG_DIR": str(tmp_path / "config")}
    third_party = sorted({r for w in wheelhouse.glob("*.whl") for r in requirements(w) if not r.startswith("xcore")})
    assert any(r.startswith("fabric") for r in third_party)
    run([*pip, *third_party], env=env, cwd=tmp_path)
    # --isolated: no pip config or PIP_* variable adds an index or another find-links location.
    run([*pip, "--isolated", "--no-index", "--find-links", wheelhouse, "xcore-xhpc", "xcore-xlocal"],
        env=env, cwd=tmp_path)

    installed = {d["name"]: d for d in json.loads(run([*pip[:-2], "list", "--format=json", "-v"], env=env).stdout)}
    assert "xcore" not in installed, "the unrelated PyPI project 'xcore' must not be pulled in"
    for name in BUILT:
        assert installed[name]["version"] == release.DISTRIBUTIONS[name].version
        assert "editable_project_location" not in installed[name]
    where = run([venv / "bin" / "python", "-c", "import xcore, xhpc; print(xcore.__file__); print(xhpc.__file__)"],
                env=env, cwd=tmp_path).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in where), where

    xcore = venv / "bin" / "xcore"
    assert run([xcore, "--help"], env=env, cwd=tmp_path).stdout.startswith("usage: xcore")
    version = run([xcore, "--version"], env=env, cwd=tmp_path).stdout.split()
    assert version == ["xcore", release.DISTRIBUTIONS["xcore-core"].version]
    plugins = {p["name"]: p for p in json.loads(run([xcore, "plugins", "--json"], env=env, cwd=tmp_path).stdout)}
    for plugin, dist in (("xhpc", "xcore-xhpc"), ("xlocal", "xcore-xlocal")):
        assert plugins[plugin]["status"] == "loaded", plugins[plugin]
        assert plugins[plugin]["distribution"] == dist
        assert plugins[plugin]["version"] == release.DISTRIBUTIONS[dist].version
    assert "xhpc.Slurm" in plugins["xhpc"]["kinds"]
    table = run([xcore, "plugins"], env=env, cwd=tmp_path).stdout
    assert "xcore-xhpc" in table and release.DISTRIBUTIONS["xcore-xhpc"].version in table


@pytest.mark.parametrize(("requirement", "complaint"), [
    ("xcore>=0.1", "unrelated PyPI project"),
    ("xcore-core>=0.1", "bounded xcore-core requirement"),
    ("xcore-core>=0.2,<0.3", "admitting"),
])
def test_check_rejects_a_plugin_not_bounded_to_this_core(wheelhouse: Path, tmp_path: Path, requirement: str,
                                                         complaint: str) -> None:
    [original] = wheelhouse.glob("xcore_xhpc-*.whl")
    forged = tmp_path / original.name
    with zipfile.ZipFile(original) as source, zipfile.ZipFile(forged, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename.endswith(".dist-info/METADATA"):
                data = data.replace(b"Requires-Dist: xcore-core<0.2,>=0.1", f"Requires-Dist: {requirement}".encode())
            target.writestr(item, data)
    assert release.check([release.DISTRIBUTIONS["xcore-xhpc"]], wheelhouse, sdist=False) == []
    problems = release.check([release.DISTRIBUTIONS["xcore-xhpc"]], tmp_path, sdist=False)
    assert any(complaint in p for p in problems), problems


def test_check_rejects_a_wheel_with_stray_packages(wheelhouse: Path, tmp_path: Path) -> None:
    [original] = wheelhouse.glob("xcore_xlocal-*.whl")
    shutil.copy(original, tmp_path)
    with zipfile.ZipFile(tmp_path / original.name, "a") as wheel:
        wheel.writestr("tests/test_x.py", "")
    [problem] = release.check([release.DISTRIBUTIONS["xcore-xlocal"]], tmp_path, sdist=False)
    assert "ships ['tests', 'xlocal']" in problem


@pytest.mark.parametrize("dist", list(release.DISTRIBUTIONS.values()), ids=list(release.DISTRIBUTIONS))
def test_each_version_is_written_once_and_has_a_changelog_entry(dist) -> None:
    project = tomllib.loads((REPO / dist.path / "pyproject.toml").read_text())
    assert project["project"]["name"] == dist.name
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": f"{dist.package}.__version__"}
    changelog = (REPO / dist.path / "CHANGELOG.md").read_text()
    releases = [line.split()[1] for line in changelog.splitlines() if line.startswith("## ")]
    assert releases and releases[0] in (dist.version, "Unreleased"), f"{dist.name}: CHANGELOG starts at {releases[:1]}"
    assert dist.version in releases, f"{dist.name} {dist.version} has no entry in its CHANGELOG.md"
