"""A learning-rate sweep, each trial in its own container built from ./project.

    sudo bash scripts/infra/docker.sh          # dockerd + the local base image, if needed
    pip install 'xcore-xlocal[docker]'
    xcore launch --wait examples/containers/launch.py
    xcore launch examples/containers/launch.py --base-image=python:3.11   # with a registry

The first launch builds the image (pip installs requirements.txt inside the build); later
launches of the unchanged project reuse it without building. Results land in --results
(default: $XCORE_HOME/results/containers, outside the checkout), mounted into every container
at /results.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import xcore as xm
import xlocal
from xcore import paths

HERE = Path(__file__).resolve().parent

parser = argparse.ArgumentParser()
parser.add_argument("--base-image", default="xcore-python:3.11")
parser.add_argument("--results", default=str(paths.home() / "results" / "containers"))
flags = parser.parse_args()
Path(flags.results).mkdir(parents=True, exist_ok=True)

with xm.create_experiment("containerized lr sweep", tags=["example", "containers"]) as experiment:
    [trainer] = experiment.package([
        xm.python_container(
            xlocal.Local.Spec(),
            xm.ModuleName("trainer.train"),
            path=HERE / "project",
            base_image=flags.base_image,
        )
    ])
    executor = xlocal.Local(
        requirements=xm.JobRequirements(cpu=0.5, memory="256MiB"),
        docker_options=xlocal.DockerOptions(volumes={flags.results: "/results"}, network="none"),
    )
    for lr in (0.3, 0.1, 0.03, 0.01):
        for seed in (1, 2):
            experiment.add(xm.Job(trainer, executor, args={"lr": lr, "seed": seed}))
