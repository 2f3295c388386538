"""One TPU v5e job (a ct5lp-hightpu-8t host, 2x4 topology) on Vertex AI."""

import sys

import xcore as xm
import xgcp

with xm.create_experiment("vertex tpu") as experiment:
    [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), sys.argv[1])])
    experiment.add(xm.Job(exe, xgcp.Vertex(requirements=xm.JobRequirements(tpu_v5e=8), location="us-west4"),
                          args={"steps": 10_000}))
