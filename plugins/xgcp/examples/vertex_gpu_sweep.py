"""A GPU learning-rate sweep on Vertex AI: one CustomJob per trial, created concurrently.

    python vertex_gpu_sweep.py IMAGE      # IMAGE: REGION-docker.pkg.dev/PROJECT/REPO/train:TAG
"""

import sys

import xcore as xm
import xgcp

image = sys.argv[1]
with xm.create_experiment("vertex gpu sweep") as experiment:
    [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), image)])
    executor = xgcp.Vertex(requirements=xm.JobRequirements(l4=1, cpu=8), scheduling="spot", timeout_secs=2 * 3600)
    for lr in (3e-4, 1e-3, 3e-3):
        for seed in range(3):
            experiment.add(xm.Job(exe, executor, args={"lr": lr, "seed": seed}))
print(f"xcore wait {experiment.experiment_id}")
