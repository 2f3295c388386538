"""``xcore plugin new NAME`` generates a distribution whose own tests (the contract suite) pass."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from core_helpers import REPO, run_xcore


def test_generated_plugin_installs_and_passes_its_contract_tests(tmp_path):
    result = run_xcore("plugin", "new", "tplcheck", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    dist = tmp_path / "xcore-tplcheck"
    assert sorted(p.relative_to(dist).as_posix() for p in dist.rglob("*") if p.is_file()) == [
        "README.md", "pyproject.toml", "tests/test_contract.py", "tplcheck/__init__.py", "tplcheck/hooks.py"]
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                    "--target", str(site), str(dist)], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("XCORE_HOME", None)
    listed = run_xcore("plugins", "--json", env={"PYTHONPATH": str(site)})
    assert '"xcore-tplcheck"' in listed.stdout
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=dist, env=env,
                           capture_output=True, text=True, timeout=600, check=False)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "10 passed" in tests.stdout and "skipped" not in tests.stdout, tests.stdout[-500:]


@pytest.mark.parametrize("name", ["My-Plugin", "class", "1abc", "xcore"])
def test_bad_names_get_a_one_line_error(tmp_path, name):
    result = run_xcore("plugin", "new", name, "--dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith("error: Plugin name") and result.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_an_existing_directory_is_not_overwritten(tmp_path):
    (tmp_path / "xcore-taken").mkdir()
    (tmp_path / "xcore-taken" / "keep.txt").write_text("mine")
    result = run_xcore("plugin", "new", "taken", "--dir", str(tmp_path))
    assert result.returncode == 1 and "exists already" in result.stderr
    assert [p.name for p in (tmp_path / "xcore-taken").iterdir()] == ["keep.txt"]


def test_the_tutorial_shows_the_generated_executor_verbatim():
    from xcore.cli.plugin_template import render

    template = (REPO / "xcore/cli/templates/hooks.py.tmpl").read_text()
    tutorial = (REPO / "docs/plugins.md").read_text()
    assert render(template, "myplugin") in tutorial
    code_lines = [line for line in template.splitlines() if line.strip()]
    assert len(code_lines) <= 100, "the tutorial promises a working executor in under 100 lines"
