"""The example third-party plugin, installed as a real distribution and used through its entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core_helpers import REPO, run_xcore, write_script


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--disable-pip-version-check", "--target", str(site), str(REPO / "examples/plugins/xcore-inline")],
        check=True, capture_output=True, timeout=300,
    )
    return site


def test_plugins_lists_the_example(plugin_site):
    result = run_xcore("plugins", "--json", env={"PYTHONPATH": str(plugin_site)})
    plugins = {p["name"]: p for p in json.loads(result.stdout)}
    assert plugins["inline"]["distribution"] == "xcore-inline" and plugins["inline"]["version"] == "0.1.0"
    assert "inline.Inline" in plugins["inline"]["kinds"]


def test_launch_script_uses_the_example_executor(plugin_site, tmp_path):
    script = write_script(tmp_path / "launch.py", """
import xinline
with xm.create_experiment("inline") as e:
    [exe] = e.package([xm.binary(xinline.Inline.Spec(), "sh", args=["-c", 'echo "got $1"; exit $2', "sh"])])
    e.add(xm.Job(exe, xinline.Inline(), args=["it's ok", "0"]))
    e.add(xm.Job(exe, xinline.Inline(), args=["x", "5"]))
""")
    env = {"PYTHONPATH": str(plugin_site)}
    assert run_xcore("launch", str(script), env=env).returncode == 0
    show = json.loads(run_xcore("show", "1", "--json", env=env).stdout)
    assert [(u["status"], u["exit_codes"]) for u in show["work_units"]] == [("COMPLETED", [0]), ("FAILED", [5])]
    assert run_xcore("logs", "1/1", env=env).stdout == "got it's ok\n"
    # Without the plugin, the store's records are still readable and say what is missing.
    unknown = run_xcore("show", "1", env={"XCORE_DISABLE_PLUGINS": "inline", "PYTHONPATH": str(plugin_site)})
    assert unknown.returncode == 0 and "COMPLETED" in unknown.stdout
