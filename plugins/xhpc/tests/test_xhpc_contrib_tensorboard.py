"""``xcore.contrib.tensorboard`` on a cluster: xhpc runs commands, so the TensorBoard job is
``python3 -m tensorboard.main`` from the node's ``python3`` (nothing shipped)."""

from __future__ import annotations

import pytest

import xcore as xm
import xhpc
from xcore.contrib import tensorboard
from xcore.testing import plugin_host


def _packaged(packageables):
    """What ``add_tensorboard`` packages, through an experiment of its own (nothing launched)."""
    with xm.create_experiment("tensorboard packaging") as experiment:
        return tensorboard._package_first(experiment, packageables)


@pytest.mark.parametrize("executor", [xhpc.Slurm, xhpc.GridEngine])
def test_the_tensorboard_job_is_the_nodes_python3(executor, tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # no file named python3 here
    plugin_host({}, entry_points=True)
    try:
        packageables = tensorboard.TensorboardProvider.get_tensorboard_packageables(60, executor.Spec())
        executable = _packaged(packageables)
    finally:
        plugin_host({}, entry_points=True)
    program, *rest = tensorboard.TensorboardProvider.get_tensorboard_command(60)
    assert executable.command == [program] and not executable.artifacts
    assert executable.args.to_list(str) == rest
