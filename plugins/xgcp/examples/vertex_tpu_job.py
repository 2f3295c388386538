"""TPU v5e jobs on Vertex AI: one host (2x4, a ct5lp-hightpu-8t) and a 4x4 slice (4 hosts of
ct5lp-hightpu-4t, tpuTopology 4x4, one replica per host; the program runs on every host).

    python vertex_tpu_job.py IMAGE    # IMAGE: REGION-docker.pkg.dev/PROJECT/REPO/train:TAG
"""

import sys

import xcore as xm
import xgcp

with xm.create_experiment("vertex tpu") as experiment:
    [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), sys.argv[1])])
    for topology in ("2x4", "4x4"):
        executor = xgcp.Vertex(requirements=xm.JobRequirements(tpu_v5e=topology), location="us-west4",
                               scheduling="spot", timeout_secs=4 * 3600)
        experiment.add(xm.Job(exe, executor, args={"steps": 10_000, "topology": topology}))
print(f"xcore wait {experiment.experiment_id}")
