import pytest

import xcore as xm
from xcore.errors import ResourceSpecError


def test_units_and_kwargs():
    req = xm.JobRequirements(cpu=4, memory=8 * xm.GiB, a100=2)
    assert req.cpu == 4 and req.memory == 8 * 2**30
    assert req.accelerator is xm.ResourceType.A100 and req.accelerator_count == 2


def test_size_strings_and_aliases():
    req = xm.JobRequirements({"RAM": "512MiB"}, gpu=1)
    assert req.memory == 512 * 2**20 and req.accelerator is xm.ResourceType.LOCAL_GPU


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"cpus": 2}, "Did you mean cpu"),
        ({"memory": "lots"}, "cannot read 'lots'"),
        ({"cpu": -1}, "must be a finite number >= 0"),
        ({"v100": 1.5}, "whole units"),
        ({"v100": 1, "a100": 1}, "one accelerator type"),
        ({"cpu": True}, "expected a number"),
        ({"replicas": 0}, "replicas"),
    ],
)
def test_bad_specs_say_what_to_fix(kwargs, message):
    with pytest.raises(ResourceSpecError, match=message):
        xm.JobRequirements(**kwargs)


def test_round_trip_through_dict():
    req = xm.JobRequirements(cpu=2, memory="1GiB", h100=8, location="us-central1")
    assert xm.JobRequirements.from_dict(req.to_dict()) == req
