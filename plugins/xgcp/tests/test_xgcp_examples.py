"""The examples in plugins/xgcp/examples run as written against the fake Vertex API (issue 32:
every example runs in CI): each creates its CustomJobs, with the machines its docstring names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
IMAGE = "us-central1-docker.pkg.dev/fake-project/xcore/train:1"


def _run(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                            env=os.environ.copy(), timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.usefixtures("xcore_home")
def test_the_gpu_sweep_creates_one_spot_l4_custom_job_per_trial(vertex):
    assert _run("vertex_gpu_sweep.py", IMAGE) == "xcore wait 1\n"
    jobs = list(vertex.jobs.values())
    assert len(jobs) == 9
    specs = [job.job_spec.worker_pool_specs[0].machine_spec for job in jobs]
    assert {(s.accelerator_type.name, s.accelerator_count) for s in specs} == {("NVIDIA_L4", 1)}


@pytest.mark.usefixtures("xcore_home")
def test_the_tpu_example_creates_a_single_host_job_and_a_four_host_slice(vertex):
    assert _run("vertex_tpu_job.py", IMAGE) == "xcore wait 1\n"
    pools = sorted((job.job_spec.worker_pool_specs[0] for job in vertex.jobs.values()), key=lambda p: p.replica_count)
    assert [(p.machine_spec.machine_type, p.replica_count) for p in pools] == [
        ("ct5lp-hightpu-8t", 1), ("ct5lp-hightpu-4t", 4)]
    assert pools[1].machine_spec.tpu_topology == "4x4"


@pytest.mark.usefixtures("xcore_home")
def test_the_tensorboard_example_creates_one_job_with_chief_and_worker_pools(vertex):
    _run("vertex_tensorboard.py", IMAGE, "projects/fake-project/locations/us-central1/tensorboards/1",
         "gs://fake-bucket/out", "trainer@fake-project.iam.gserviceaccount.com")
    [job] = vertex.jobs.values()
    assert job.job_spec.tensorboard.endswith("tensorboards/1")
    assert [p.replica_count for p in job.job_spec.worker_pool_specs] == [1, 2]
