"""``xcore.contrib.tensorboard`` on Kubernetes: xk8s runs only images, so the TensorBoard job is
the command in ``tensorflow/tensorflow`` (nothing built or pushed)."""

from __future__ import annotations

import pytest

import xcore as xm
import xk8s
from xcore.contrib import tensorboard
from xcore.testing import plugin_host


def _packaged(packageables):
    """What ``add_tensorboard`` packages, through an experiment of its own (nothing launched)."""
    with xm.create_experiment("tensorboard packaging") as experiment:
        return tensorboard._package_first(experiment, packageables)


def test_the_tensorboard_job_is_the_command_in_tensorflows_image(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    plugin_host({}, entry_points=True)
    try:
        packageables = tensorboard.TensorboardProvider.get_tensorboard_packageables(60, xk8s.Kubernetes.Spec())
        executable = _packaged(packageables)
    finally:
        plugin_host({}, entry_points=True)
    assert isinstance(executable, xk8s.KubernetesExecutable)
    assert executable.image == "tensorflow/tensorflow" and executable.command == []
    assert executable.args.to_list(str) == tensorboard.TensorboardProvider.get_tensorboard_command(60)
