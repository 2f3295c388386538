"""The sweep, resumable: each trial checkpoints to XCORE_CHECKPOINT_DIR and, stopped by a signal
(a time limit's warning, a preemption), exits 75 to be run again from its checkpoint.

    xcore launch --wait examples/sweep/launch_resumable.py -- --preempt_at=150
    xcore logs 1/1      # step 100, "SIGUSR1 at step 150", then "resumed from step 150 (attempt 2)"

--preempt_at=K makes each trial's first attempt signal itself at step K: the time limit or
preemption a cluster would send (docs/long-runs.md). The same script runs on Slurm or Grid
Engine with an xhpc executor in place of xlocal.Local.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import xcore as xm
import xlocal
from xcore import paths

HERE = Path(__file__).resolve().parent
EXIT_RESUME = 75  # train.py's "stopped early, run me again"

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--preempt_at", type=int, help="each trial's attempt 1 stops itself at this step")
parser.add_argument("--results", default=str(paths.home() / "results" / "sweep-resumable"))
flags = parser.parse_args()

# Preemptions, dead nodes and time limits are retried; so is a trial that saved its state and
# asked to be run again (exit 75). A real bug (any other exit code) is not.
policy = xm.Retry(max_attempts=3, on=("preemption", "node_failure", "timeout"), exit_codes=(EXIT_RESUME,))

with xm.create_experiment("resumable lr x batch-size sweep", tags=["example", "sweep"]) as experiment:
    [trainer] = experiment.package([xm.python_module(xlocal.Local.Spec(), "train", path=HERE)])
    executor = xlocal.Local(requirements=xm.JobRequirements(cpu=1), retry=policy)
    for trial, (lr, batch_size) in enumerate(itertools.product([0.1, 0.03], [8, 32]), 1):
        output_dir = Path(flags.results) / f"experiment-{experiment.experiment_id}" / f"trial-{trial}"
        args = {"lr": lr, "batch_size": batch_size, "steps": flags.steps, "output_dir": str(output_dir)}
        if flags.preempt_at is not None:
            args["preempt_at"] = flags.preempt_at
        experiment.add(xm.Job(trainer, executor, args=args))
