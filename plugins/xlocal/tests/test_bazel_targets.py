"""Bazel targets on xlocal with the real ``bazel`` (Debian's bazel-bootstrap builds genrules
offline): a binary, an image tarball loaded into the real Docker engine, and a failing build."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

import xcore as xm
import xlocal
from xcore.errors import PackagingError
from xcore.runtime.packaging import package
from xcore.testing import require_service

pytestmark = pytest.mark.infra("bazel")

BASE_IMAGE = os.environ.get("XLOCAL_TEST_BASE_IMAGE", "xcore-python:3.11")


@pytest.fixture(scope="module")
def bazel_root():
    """One short-lived Bazel server for this module, with its output under a temporary root
    (short path: the server's socket lives there), shut down and removed afterwards."""
    require_service("bazel", lambda: shutil.which("bazel") is not None,
                    "install Bazel: sudo bash scripts/infra/bazel.sh (Debian's bazel-bootstrap)")
    root = Path(tempfile.mkdtemp(prefix="xbz"))
    startup = [f"--output_user_root={root / 'out'}", "--max_idle_secs=120"]
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "WORKSPACE").write_text("")
    yield workspace, startup
    subprocess.run(["bazel", *startup, "shutdown"], cwd=workspace, capture_output=True, check=False, timeout=120)
    subprocess.run(["chmod", "-R", "u+w", str(root)], check=False)  # Bazel makes its outputs read-only
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def workspace(bazel_root, tmp_path, monkeypatch) -> Path:
    import xcore.hooks.host

    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))  # a private store for each test
    monkeypatch.setenv("XCORE_QUIET", "1")
    xcore.hooks.host.reset_host()
    root, startup = bazel_root
    for stale in root.iterdir():
        if stale.name not in ("WORKSPACE",) and not stale.name.startswith("bazel-"):
            stale.unlink()
    monkeypatch.setenv("XCORE_BAZEL_WORKSPACE", str(root))
    monkeypatch.setenv("XCORE_BAZEL_STARTUP_ARGS", " ".join(startup))
    return root


def test_a_bazel_binary_runs_with_its_args(workspace):
    (workspace / "show.sh").write_text('#!/bin/sh\nfor a in "$@"; do echo "[$a]"; done\n')
    (workspace / "BUILD").write_text(textwrap.dedent("""
        genrule(name = "show", srcs = ["show.sh"], outs = ["show_bin"], cmd = "cp $< $@ && chmod +x $@",
                executable = True)
    """))
    with xm.create_experiment("bazel binary") as experiment:
        [exe] = experiment.package([xm.bazel_binary(xlocal.Local.Spec(), "//:show", args=["a b"])])
        experiment.add(xm.Job(exe, xlocal.Local(), args={"flag": "$HOME"}))
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.status is xm.Status.COMPLETED
    assert Path(job.log_path).read_text() == "[a b]\n[--flag=$HOME]\n"


def test_a_failing_build_is_a_packaging_error_with_bazels_message(workspace):
    (workspace / "BUILD").write_text('genrule(name = "bad", outs = ["x"], cmd = "exit 7")\n')
    with pytest.raises(PackagingError, match=r"bazel build //:bad.*failed"):
        package([xm.bazel_binary(xlocal.Local.Spec(), "//:bad")])


def test_a_bazel_container_is_loaded_and_run(workspace):
    from xcore import images

    try:
        client = images.connect()
        client.api.inspect_image(BASE_IMAGE)
        up = True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        up = False
    require_service("dockerd", up, f"run `sudo bash scripts/infra/docker.sh` (builds {BASE_IMAGE})")
    with open(workspace / "base.tar", "wb") as out:
        out.writelines(client.images.get(BASE_IMAGE).save(named=True))
    (workspace / "BUILD").write_text(
        'genrule(name = "image", srcs = ["base.tar"], outs = ["image.tar"], cmd = "cp $< $@")\n')
    with xm.create_experiment("bazel container") as experiment:
        [exe] = experiment.package([xm.bazel_container(xlocal.Local.Spec(), "//:image")])
        assert exe.image_id == client.api.inspect_image(BASE_IMAGE)["Id"]
        experiment.add(xm.Job(exe, xlocal.Local(), args=["python3", "-c", "import sys; print('inside', sys.argv[1:])",
                                                         "x y"]))
    [job] = experiment.wait_until_complete(timeout=120)
    assert job.status is xm.Status.COMPLETED, job.message
    from xcore.hooks.host import get_host

    host = get_host()
    assert "".join(host.job_logs(job.handle_kind, host.serializer.load(job.handle), False)) == "inside ['x y']\n"
