"""A JobGroup (chief + 2 workers) writing to a Vertex TensorBoard instance.

Ported from an XManager Vertex script by changing the imports:
    from xmanager import xm            ->  import xcore as xm
    from xmanager import xm_local      ->  import xgcp as xm_local
    xm_local.vertex.TensorboardCapability -> xm_local.TensorboardCapability
and xm_local.create_experiment -> xm.create_experiment.
"""

import sys

import xcore as xm
import xgcp as xm_local

# image URI, projects/P/locations/L/tensorboards/ID, gs://bucket/dir, service account (TensorBoard needs one)
image, tensorboard, bucket, service_account = sys.argv[1:5]
with xm.create_experiment("vertex tensorboard") as experiment:
    [exe] = experiment.package([xm.container(xm_local.Vertex.Spec(), image)])
    board = xm_local.TensorboardCapability(name=tensorboard, base_output_directory=bucket)
    experiment.add(xm.JobGroup(
        chief=xm.Job(exe, xm_local.Vertex(requirements=xm.JobRequirements(a100=1), tensorboard=board,
                                          service_account=service_account)),
        worker=xm.Job(exe, xm_local.Vertex(requirements=xm.JobRequirements(a100=1, replicas=2))),
    ))
