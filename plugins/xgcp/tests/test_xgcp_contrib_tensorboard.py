"""``xcore.contrib.tensorboard`` on Vertex: xgcp runs only images, so the TensorBoard job is the
command in ``tensorflow/tensorflow`` (nothing built or pushed)."""

from __future__ import annotations

import pytest

import xcore as xm
import xgcp
from xcore.contrib import tensorboard

pytestmark = pytest.mark.usefixtures("xcore_home")


def _packaged(packageables):
    """What ``add_tensorboard`` packages, through an experiment of its own (nothing launched)."""
    with xm.create_experiment("tensorboard packaging") as experiment:
        return tensorboard._package_first(experiment, packageables)


def test_the_tensorboard_job_is_the_command_in_tensorflows_image():
    packageables = tensorboard.TensorboardProvider.get_tensorboard_packageables(60, xgcp.Vertex.Spec())
    executable = _packaged(packageables)
    assert isinstance(executable, xgcp.VertexExecutable)
    assert executable.image_uri == "tensorflow/tensorflow" and executable.command == []
    assert executable.args.to_list(str) == tensorboard.TensorboardProvider.get_tensorboard_command(60)
