"""``xcore plugin new NAME`` generates a distribution whose own tests (the contract suite) pass,
whose jobs report their times, and which the repository's pinned ruff finds clean as a project
of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from core_helpers import REPO, run_xcore

GENERATED = [".gitignore", "README.md", "pyproject.toml", "tests/test_contract.py", "tplcheck/__init__.py",
             "tplcheck/hooks.py"]


def test_generated_plugin_installs_and_passes_its_contract_tests(tmp_path, xcore_home):
    result = run_xcore("plugin", "new", "tplcheck", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    dist = tmp_path / "xcore-tplcheck"
    assert sorted(p.relative_to(dist).as_posix() for p in dist.rglob("*") if p.is_file()) == GENERATED
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                    "--target", str(site), str(dist)], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("XCORE_HOME", None)
    listed = json.loads(run_xcore("plugins", "--json", env={"PYTHONPATH": str(site)}).stdout)
    [plugin] = [p for p in listed if p["distribution"] == "xcore-tplcheck"]
    assert plugin["kinds"] == ["tplcheck.Tplcheck", "tplcheck.TplcheckExecutable", "tplcheck.TplcheckHandle",
                               "tplcheck.TplcheckSpec"]
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=dist, env=env,
                           capture_output=True, text=True, timeout=600, check=False)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "11 passed" in tests.stdout and "skipped" not in tests.stdout, tests.stdout[-500:]

    # A job first seen after it ended: its duration is the plugin's times (started_at, ended_at),
    # not the moment xcore first saw it (which made it 0.0s).
    script = tmp_path / "launch.py"
    script.write_text(textwrap.dedent("""
        import xcore as xm
        import tplcheck

        with xm.create_experiment("durations") as experiment:
            [exe] = experiment.package([xm.binary(tplcheck.TplcheckSpec(), "sleep")])
            experiment.add(xm.Job(exe, tplcheck.Tplcheck(), args=["1.5"]))
    """))
    run_env = {"PYTHONPATH": str(site)}
    launched = run_xcore("launch", str(script), env=run_env)
    assert launched.returncode == 0, launched.stderr
    deadline = time.monotonic() + 60
    while not list((xcore_home / "plugins/tplcheck/jobs").glob("*/exit_code")):  # ended, not yet asked
        assert time.monotonic() < deadline, "the job never ended"
        time.sleep(0.1)
    [unit] = json.loads(run_xcore("show", "1", "--json", env=run_env).stdout)["work_units"]
    assert unit["status"] == "COMPLETED" and 1.4 <= unit["duration"] < 10, unit


@pytest.mark.parametrize(("name", "executor"), [("tplcheck", None), ("lab_cluster_queue_system", "LabQueueExecutor")])
def test_a_generated_project_is_clean_for_the_pinned_ruff(tmp_path, name, executor):
    """As its own project (xcore third-party, the plugin first-party), with default isort settings."""
    pytest.importorskip("ruff", reason="the pinned linters are not installed (pip install -r scripts/lint-tools.txt)")
    result = run_xcore("plugin", "new", name, "--dir", str(tmp_path), *(["--executor", executor] if executor else []))
    assert result.returncode == 0, result.stderr
    dist = tmp_path / f"xcore-{name}"
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=dist, capture_output=True,
                          text=True, timeout=120, check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_executor_names_every_class_in_every_file(tmp_path):
    assert run_xcore("plugin", "new", "tmuxrun", "--executor", "Tmux", "--dir", str(tmp_path)).returncode == 0
    dist = tmp_path / "xcore-tmuxrun"
    hooks = (dist / "tmuxrun/hooks.py").read_text()
    for cls in ("Tmux", "TmuxSpec", "TmuxExecutable", "TmuxHandle", "TmuxBackend"):
        assert f"class {cls}(" in hooks, cls
    assert '"tmuxrun.Tmux" = "tmuxrun"' in (dist / "pyproject.toml").read_text()
    assert "tmuxrun.TmuxSpec()" in (dist / "tests/test_contract.py").read_text()
    assert "Tmuxrun" not in "".join(p.read_text() for p in dist.rglob("*") if p.is_file())
    compile(hooks, "hooks.py", "exec")


@pytest.mark.parametrize("name", ["My-Plugin", "class", "1abc", "xcore"])
def test_bad_names_get_a_one_line_error(tmp_path, name):
    result = run_xcore("plugin", "new", name, "--dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith("error: Plugin name") and result.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("executor", ["tmux", "TMUX", "My-Exec", "Tmux Exec"])
def test_bad_executor_names_get_a_one_line_error(tmp_path, executor):
    result = run_xcore("plugin", "new", "ok", "--executor", executor, "--dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith("error: Executor name") and result.stderr.count("\n") == 1
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
