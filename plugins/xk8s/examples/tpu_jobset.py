"""A JobGroup on TPUs as ONE JobSet: two v5e slices (2x4) training, one evaluator on CPUs.

Each role is a replicated Job of the JobSet; ``num_slices=2`` makes two replicas (multi-slice
training, as xpk does). With a Kueue queue (examples/kueue_queue.yaml) the whole set is
admitted at once, as one Workload.
"""

import xcore as xm
import xk8s

IMAGE = "us-docker.pkg.dev/my-lab/xcore/maxtext:v1"

with xm.create_experiment(title="tpu-multislice") as experiment:
    [trainer, evaluator] = experiment.package([
        xk8s.image(IMAGE, ["python3", "-m", "maxtext.train"]),
        xk8s.image(IMAGE, ["python3", "-m", "maxtext.eval"]),
    ])
    tpu = xk8s.Kubernetes(target="gke", queue="lab-queue", workload_priority="high",
                          requirements=xm.JobRequirements(tpu_v5e="2x4", num_slices=2))
    cpu = xk8s.Kubernetes(target="gke", queue="lab-queue", requirements=xm.JobRequirements(cpu=4, memory="16GiB"))
    experiment.add(xm.JobGroup(train=xm.Job(trainer, tpu, args={"steps": 10000}),
                               eval=xm.Job(evaluator, cpu)))
