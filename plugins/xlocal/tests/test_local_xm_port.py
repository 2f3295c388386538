"""``xcore port`` with xlocal installed: xm_local names are checked against xlocal's exports, and
ported XManager launchers run for real on it (moved from the core's tests/test_xm_compat_port.py,
which checks the rewriting itself)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from xlocal_helpers import REPO, core_test_module, run_xcore

from xcore.cli.port import port_source
from xcore.testing import require_service

pytestmark = pytest.mark.usefixtures("xcore_home")
EXAMPLES = REPO / "examples" / "xmanager_local"
XM_SCRIPT = core_test_module("test_xm_compat_port").XM_SCRIPT  # the core's sample launcher, not a copy


def test_names_without_an_xcore_equivalent_are_listed_with_their_line():
    unmapped = {(u.line, u.name): u.reason for u in port_source(XM_SCRIPT).unmapped}
    assert set(unmapped) == {(5, "xmanager.xm_abc"), (12, "local_api.Kubernetes(cloud_provider=...)"),
                             (13, "xm_local.Caip")}
    assert "kubeconfig" in unmapped[(12, "local_api.Kubernetes(cloud_provider=...)")]
    assert "Vertex" in unmapped[(13, "xm_local.Caip")]


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
