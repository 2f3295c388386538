"""``xcore.contrib.tensorboard`` on Vertex: xgcp runs only images, so the TensorBoard job is the
command in ``tensorflow/tensorflow`` (nothing built or pushed)."""

from __future__ import annotations

import pytest

import xgcp
from xcore.contrib import tensorboard
from xcore.runtime.packaging import package

pytestmark = pytest.mark.usefixtures("xcore_home")


class _Packager:
    """An experiment's ``package``, without an experiment (nothing is launched)."""

    def package(self, packageables):
        return package(packageables)


def test_the_tensorboard_job_is_the_command_in_tensorflows_image():
    packageables = tensorboard.TensorboardProvider.get_tensorboard_packageables(60, xgcp.Vertex.Spec())
    executable = tensorboard._package_first(_Packager(), packageables)
    assert isinstance(executable, xgcp.VertexExecutable)
    assert executable.image_uri == "tensorflow/tensorflow" and executable.command == []
    assert executable.args.to_list(str) == tensorboard.TensorboardProvider.get_tensorboard_command(60)
