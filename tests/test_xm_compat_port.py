"""``xcore port``: XManager/lxm3 launch scripts rewritten for xcore, then run for real."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from core_helpers import run_xcore
from xcore.cli.port import port_source
from xcore.testing import require_service

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "xmanager_local"

XM_SCRIPT = textwrap.dedent('''\
    """Docstring stays."""
    # a comment above the imports
    from absl import app
    from xmanager import xm   # trailing comment, odd spacing
    from xmanager import xm_local, xm_abc
    import xmanager.xm_local as local_api
    from xmanager.xm import JobRequirements as Req

    def main(_):
        with xm_local.create_experiment(experiment_title='t') as e:   # keep me
            e.add(xm.Job(exe, xm_local.Vertex(Req(cpu=1))))
            local_api.Kubernetes(cloud_provider='GKE')
            xm_local.Caip()
''')


def test_imports_are_rewritten_and_everything_else_is_kept():
    result = port_source(XM_SCRIPT)
    assert result.code.splitlines() == [
        '"""Docstring stays."""',
        "# a comment above the imports",
        "from absl import app",
        "import xcore as xm   # trailing comment, odd spacing",
        "from xmanager import xm_abc",
        "import xlocal as xm_local",
        "import xgcp",  # added: xm_local.Vertex is used below
        "import xlocal as local_api",
        "import xk8s",
        "from xcore import JobRequirements as Req",
        "",
        "def main(_):",
        "    with xm_local.create_experiment(experiment_title='t') as e:   # keep me",
        "        e.add(xm.Job(exe, xgcp.Vertex(Req(cpu=1))))",
        "        xk8s.Kubernetes(cloud_provider='GKE')",
        "        xm_local.Caip()",
    ]
    assert [c.line for c in result.changes] == [4, 5, 6, 7, 11, 12]


def test_names_without_an_xcore_equivalent_are_listed_with_their_line():
    unmapped = {(u.line, u.name): u.reason for u in port_source(XM_SCRIPT).unmapped}
    assert set(unmapped) == {(5, "xmanager.xm_abc"), (12, "local_api.Kubernetes(cloud_provider=...)"),
                             (13, "xm_local.Caip")}
    assert "kubeconfig" in unmapped[(12, "local_api.Kubernetes(cloud_provider=...)")]
    assert "Vertex" in unmapped[(13, "xm_local.Caip")]


def test_xm_local_cloud_executors_move_to_their_plugins():
    source = ("from xmanager.xm_local import (Local,\n    Vertex, TensorboardCapability)\n"
              "from xmanager.xm_local import KubernetesSpec\n"
              "import xmanager.xm_local as xl\n"
              "spec = xl.Vertex.Spec(push_image_tag='t')  # keep\n")
    result = port_source(source)
    assert result.code == (
        "from xlocal import Local\nfrom xgcp import Vertex, TensorboardCapability\n"
        "from xk8s import KubernetesSpec\n"
        "import xlocal as xl\nimport xgcp\n"
        "spec = xgcp.Vertex.Spec(push_image_tag='t')  # keep\n")
    assert not result.unmapped


def test_lxm3_imports_map_to_xcore_and_xhpc():
    source = "from lxm3 import xm\nfrom lxm3 import xm_cluster\nfrom lxm3.xm_cluster import ArrayJob, Config\n"
    result = port_source(source)
    assert result.code == (
        "import xcore as xm\nfrom xhpc import xm_cluster\nfrom xhpc.xm_cluster import ArrayJob, Config\n")
    assert [u.name for u in result.unmapped] == ["lxm3.xm_cluster.Config"]


def test_a_script_without_xmanager_imports_is_unchanged():
    source = "import os  # nothing to do\nprint(os.sep)\n"
    result = port_source(source)
    assert result.code == source and not result.changes and not result.unmapped


def test_the_command_never_edits_without_write(tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(XM_SCRIPT)
    shown = run_xcore("port", str(script))
    assert shown.returncode == 1  # something could not be mapped
    assert script.read_text() == XM_SCRIPT
    assert "+import xcore as xm" in shown.stdout and "-from xmanager import xm" in shown.stdout
    assert "not mapped: xm_local.Caip" in shown.stderr and "use --write" in shown.stderr

    out = tmp_path / "ported.py"
    assert run_xcore("port", str(script), "-o", str(out)).returncode == 1
    assert script.read_text() == XM_SCRIPT and out.read_text() == port_source(XM_SCRIPT).code

    assert run_xcore("port", "--write", str(script)).returncode == 1
    assert script.read_text() == port_source(XM_SCRIPT).code


def test_bad_input_is_a_one_line_error(tmp_path):
    missing = run_xcore("port", str(tmp_path / "nope.py"))
    assert missing.returncode == 1 and "no such file" in missing.stderr and "Traceback" not in missing.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    result = run_xcore("port", str(broken))
    assert result.returncode == 1 and "not valid Python" in result.stderr and "Traceback" not in result.stderr


def test_an_xmanager_style_launcher_runs_after_porting(tmp_path):
    work = tmp_path / "example"
    shutil.copytree(EXAMPLES, work)
    ported = run_xcore("port", "--write", str(work / "launcher.py"))
    assert ported.returncode == 0, ported.stderr
    out = tmp_path / "out"
    out.mkdir()
    result = run_xcore("launch", "--wait", str(work / "launcher.py"), "--", f"--output_dir={out}")
    assert result.returncode == 0, result.stderr
    received = {p.stem: p.read_text().strip() for p in out.glob("*.txt")}
    assert received["sweep_0.1"] == "['--lr=0.1', '--layers=64', '--layers=32']"  # lists repeat, None is left out
    assert received["server"] == "[]"
    assert received["learner"] == "['--steps=3', '--server=1_3_server']"  # experiment 1, unit 3


@pytest.mark.infra("bazel")
def test_a_bazel_launcher_builds_with_real_bazel_after_porting(tmp_path):
    require_service("bazel", lambda: shutil.which("bazel") is not None,
                    "install Bazel: sudo bash scripts/infra/bazel.sh (Debian's bazel-bootstrap)")
    work = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "bazel_workspace", work)
    assert run_xcore("port", "--write", str(work / "launcher.py")).returncode == 0
    out = tmp_path / "printed.txt"
    bazel_root = Path(tempfile.mkdtemp(prefix="xbz"))  # short: Bazel's server socket lives there
    startup = [f"--output_user_root={bazel_root}", "--max_idle_secs=60"]
    try:
        result = run_xcore("launch", "--wait", str(work / "launcher.py"), "--", f"--output={out}", cwd=work,
                           env={"XCORE_BAZEL_STARTUP_ARGS": " ".join(startup)})
    finally:
        subprocess.run(["bazel", *startup, "shutdown"], cwd=work, capture_output=True, check=False, timeout=120)
        subprocess.run(["chmod", "-R", "u+w", str(bazel_root)], check=False)
        shutil.rmtree(bazel_root, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert out.read_text().splitlines() == ["3", "--greeting=hello world", "--n=1", "--n=2"]
