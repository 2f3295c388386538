"""A 100-trial learning-rate sweep on GKE A100s: ONE Indexed Job (plus its ConfigMap).

    xcore launch plugins/xk8s/examples/gke_gpu_sweep.py

The image must contain the project and python3 (the sweep's entrypoint is a few lines of
Python that exec each trial's argv). Or let xk8s build and push it, tagged by content:
``xm.python_container(xk8s.Kubernetes.Spec(target="gke"), xm.ModuleName("mypkg.train"), path=".")``.
"""

import xcore as xm
import xk8s

IMAGE = "us-docker.pkg.dev/my-lab/xcore/train:v1"

with xm.create_experiment(title="gke-lr-sweep") as experiment:
    [exe] = experiment.package([xk8s.image(IMAGE, ["python3", "-m", "mypkg.train"])])
    executor = xk8s.Kubernetes(
        target="gke",                                   # k8s.toml: context, namespace, queue
        requirements=xm.JobRequirements(cpu=8, memory=64 * xm.GiB, a100=1),
        tolerations=[xk8s.Toleration(key="nvidia.com/gpu", effect="NoSchedule")],
        env_from_secrets={"WANDB_API_KEY": "wandb/api-key"},
        volumes=[xk8s.Volume(name="data", mount_path="/data", pvc="imagenet", read_only=True),
                 xk8s.Volume(name="shm", mount_path="/dev/shm", empty_dir=True, medium="Memory")],
        retries=2,                     # per trial; preemption and eviction do not count
        max_parallel=20,               # pods of the sweep running at once
        time_limit_secs=6 * 3600,
    )
    for i in range(100):
        experiment.add(xm.Job(exe, executor, args={"lr": 10 ** (-2 - 3 * i / 99), "seed": i}))
