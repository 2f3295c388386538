"""A 20-trial hyperparameter sweep on this machine.

    xcore launch examples/sweep/launch.py --wait
    xcore launch examples/sweep/launch.py -- --steps=500 --results=/tmp/my-results

Each trial writes metrics.json under --results (default: $XCORE_HOME/results/sweep).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import xcore as xm
import xlocal
from xcore import paths

HERE = Path(__file__).resolve().parent

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
# Results go under xcore's state directory (XCORE_HOME), never into the checkout.
parser.add_argument("--results", default=str(paths.home() / "results" / "sweep"))
flags = parser.parse_args()

with xm.create_experiment("lr x batch-size sweep", tags=["example", "sweep"]) as experiment:
    [trainer] = experiment.package([xm.python_module(xlocal.Local.Spec(), "train", path=HERE)])
    executor = xlocal.Local(requirements=xm.JobRequirements(cpu=1))
    trials = itertools.product([0.3, 0.1, 0.03, 0.01, 0.003], [8, 32, 64, 128])
    for trial, (lr, batch_size) in enumerate(trials, 1):
        output_dir = Path(flags.results) / f"experiment-{experiment.experiment_id}" / f"trial-{trial}"
        experiment.add(
            xm.Job(trainer, executor, args={"lr": lr, "batch_size": batch_size, "steps": flags.steps,
                                            "output_dir": str(output_dir)})
        )
