"""xm_local's surface on xlocal: what a script written for XManager's local backend uses (moved
from the core's tests/test_xm_compat.py)."""

from __future__ import annotations

import pytest

import xcore as xm


def test_local_takes_xmanagers_positional_fields():
    import xlocal

    options = xlocal.DockerOptions({8080: 8080}, {"/tmp": "/data"}, False, False)
    local = xlocal.Local(xm.JobRequirements(cpu=1), options, True)
    assert local.requirements == xm.JobRequirements(cpu=1)
    assert local.docker_options.ports == {8080: 8080} and local.docker_options.mount_gcs_path is False
    assert local.experimental_stream_output is True
    assert xlocal.Local().experimental_stream_output is False
    assert xlocal.DockerOptions(ports=None, volumes=None).ports == {}
    with pytest.raises(TypeError):
        xlocal.Local(xm.JobRequirements(), None, False, 4)  # max_parallel and the rest are keyword-only


def test_xlocal_has_xm_locals_experiment_functions():
    import xlocal

    assert xlocal.create_experiment is xm.create_experiment
    assert xlocal.get_experiment is xm.get_experiment and xlocal.list_experiments is xm.list_experiments
    assert isinstance(xlocal.Local().Spec(), xlocal.LocalSpec)
