"""A 100-trial learning-rate sweep on a Slurm cluster: one array job, one work unit per trial.

    pip install xcore-xhpc
    xcore cluster check mycluster           # SSH, scheduler and staging directory OK?
    XCORE_CLUSTER=mycluster xcore launch examples/slurm/launch.py -- --trials 100
    xcore show 1; xcore logs 1/3 --follow

The cluster is configured in ~/.config/xcore/clusters.toml (see plugins/xhpc/README.md);
without one, the sweep runs on this machine's Slurm (login-node mode).
"""

import argparse
from pathlib import Path

import xcore as xm
import xhpc

parser = argparse.ArgumentParser()
parser.add_argument("--trials", type=int, default=100)
parser.add_argument("--cluster", default=None, help="a name from clusters.toml (default: XCORE_CLUSTER)")
options = parser.parse_args()

project = Path(__file__).resolve().parent / "project"
with xm.create_experiment(title="slurm-lr-sweep") as experiment:
    [executable] = experiment.package([xm.Packageable(
        xhpc.PythonPackage(xm.ModuleName("lrsweep.train"), path=project),
        xhpc.Slurm.Spec(),
    )])
    executor = xhpc.Slurm(
        cluster=options.cluster,
        requirements=xm.JobRequirements(cpu=1, memory=1 * xm.GiB),
        time_limit="0:10:00",
        max_parallel_tasks=50,          # --array=0-99%50
    )
    for trial in range(options.trials):
        lr = 10 ** (-1 - 3 * trial / options.trials)
        experiment.add(xm.Job(executable, executor, args={"lr": lr, "seed": trial}))
