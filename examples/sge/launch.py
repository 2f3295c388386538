"""A seed sweep on a Grid Engine cluster (SGE/UGE): one `qsub -t` array job.

    XCORE_CLUSTER=mysge xcore launch examples/sge/launch.py -- --seeds 20
    xcore show 1

Runs plain commands on the cluster (nothing to package); the per-task arguments reach the
program byte for byte, whatever quotes or `$` they hold.
"""

import argparse

import xcore as xm
import xhpc

parser = argparse.ArgumentParser()
parser.add_argument("--seeds", type=int, default=20)
parser.add_argument("--cluster", default=None)
options = parser.parse_args()

with xm.create_experiment(title="sge-seed-sweep") as experiment:
    [executable] = experiment.package([xm.Packageable(
        xhpc.Command(['echo "seed=$1 note=$2 on $(hostname)"']),
        xhpc.GridEngine.Spec(),
    )])
    executor = xhpc.GridEngine(
        cluster=options.cluster,
        queue="all.q",
        requirements=xm.JobRequirements(cpu=1),
        time_limit=600,                 # -l h_rt=600
        max_parallel_tasks=8,           # -tc 8
    )
    for seed in range(options.seeds):
        experiment.add(xm.Job(executable, executor, args=[str(seed), f"it's trial {seed}"]))
