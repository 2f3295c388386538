"""Vertex cannot rerun a CustomJob: a failed one reports its failure class, and the core's
observers relaunch one whose policy retries that class (a reclaimed spot VM: preempted)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from xgcp_testkit import jobs, wait

import xcore as xm
import xgcp
from xgcp.hooks import EXPIRED, FAILED, failure_class

IMAGE = "fake.registry/job:1"


@pytest.mark.parametrize(("state", "code", "text", "expected"), [
    (FAILED, 3, "The replica workerpool0-0 was preempted.", "preempted"),
    (FAILED, 3, "The replica workerpool0-0 ran out-of-memory and exited with a non-zero status of 137.",
     "out_of_memory"),
    (EXPIRED, 0, "", "timeout"),
    (FAILED, 4, "Deadline exceeded", "timeout"),
    (FAILED, 14, "The VM was stopped for host maintenance", "node_failure"),
    (FAILED, 3, "Resources are insufficient in region: us-central1.", "launch"),
    (FAILED, 3, "something else", "error"),
])
def test_failure_classes(state, code, text, expected):
    assert failure_class(state, code, text) == expected


def test_a_preempted_custom_job_is_relaunched_and_completes_as_attempt_2(vertex: Any, xcore_home):
    vertex.add_image(IMAGE, [sys.executable, "-c", "pass"])
    vertex.auto_run = False
    with xm.create_experiment("spot") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        experiment.add(xm.Job(exe, xgcp.Vertex(), env_vars={"WANDB_API_KEY": "s3cret"}))
    [name] = vertex.jobs
    vertex.set_state(name, "RUNNING")
    vertex.set_state(name, "FAILED", "The replica workerpool0-0 was preempted.")
    xm.get_experiment(experiment.experiment_id).get_status()  # an observer: relaunches it
    assert len(vertex.jobs) == 2  # one relaunch
    second = next(n for n in vertex.jobs if n != name)
    env = {e.name: e.value for e in vertex.jobs[second].job_spec.worker_pool_specs[0].container_spec.env}
    assert env == {"WANDB_API_KEY": "s3cret", "XCORE_ATTEMPT": "2"}  # the real secret, from Vertex's job spec
    vertex.set_state(second, "SUCCEEDED")
    [job] = wait(experiment.experiment_id)
    assert job.status is xm.Status.COMPLETED and job.attempt == 2
    assert len(vertex.jobs) == 2
    [job] = jobs(experiment.experiment_id)
    assert job.handle is not None


# -- checkpoints: Vertex(checkpoint_bucket=...) -------------------------------------------------

BUCKET = "gs://ckpt-bucket/runs"


def _env(vertex: Any, name: str, pool: int = 0) -> dict[str, str]:
    return {e.name: e.value for e in vertex.jobs[name].job_spec.worker_pool_specs[pool].container_spec.env}


def _preempt_and_observe(vertex: Any, experiment_id: int, name: str) -> str:
    """Attempt ``name`` is preempted; an observer relaunches it: the new CustomJob's name."""
    vertex.set_state(name, "RUNNING")
    vertex.set_state(name, "FAILED", "The replica workerpool0-0 was preempted.")
    before = set(vertex.jobs)
    xm.get_experiment(experiment_id).get_status()
    [relaunched] = set(vertex.jobs) - before
    return relaunched


def test_every_attempt_of_a_unit_gets_the_same_checkpoint_dir_on_the_bucket(vertex: Any, xcore_home):
    vertex.add_image(IMAGE, [sys.executable, "-c", "pass"])
    vertex.auto_run = False
    executor = xgcp.Vertex(checkpoint_bucket=BUCKET, retry=xm.Retry(max_attempts=2))
    with xm.create_experiment("resumable") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        experiment.add(xm.Job(exe, executor, args={"lr": 0.1}))
        experiment.add(xm.Job(exe, executor, args={"lr": 0.2}))
    exp = experiment.experiment_id
    first = {int(j.labels["xcore_unit"]): j.name for j in vertex.jobs.values()}
    assert sorted(first) == [1, 2]
    for unit, name in first.items():
        assert _env(vertex, name) == {"XCORE_ATTEMPT": "1",
                                      "XCORE_CHECKPOINT_DIR": f"/gcs/ckpt-bucket/runs/checkpoints/{exp}/{unit}"}
    second = _preempt_and_observe(vertex, exp, first[1])  # the observer's relaunch: attempt 2, same dir
    assert _env(vertex, second) == {"XCORE_ATTEMPT": "2",
                                    "XCORE_CHECKPOINT_DIR": f"/gcs/ckpt-bucket/runs/checkpoints/{exp}/1"}
    vertex.set_state(second, "FAILED", "something else")  # the program's failure: not retried by the policy
    vertex.set_state(first[2], "SUCCEEDED")
    wait(exp)
    before = set(vertex.jobs)
    xm.get_experiment(exp).retry()  # `xcore retry`: attempt 3, the same dir again
    [third] = set(vertex.jobs) - before
    assert _env(vertex, third) == {"XCORE_ATTEMPT": "3",
                                   "XCORE_CHECKPOINT_DIR": f"/gcs/ckpt-bucket/runs/checkpoints/{exp}/1"}


def test_the_pools_of_a_job_group_share_their_unit_s_checkpoint_dir(vertex: Any, xcore_home):
    vertex.add_image(IMAGE, [sys.executable, "-c", "pass"])
    vertex.auto_run = False
    with xm.create_experiment("group") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        experiment.add(xm.JobGroup(
            chief=xm.Job(exe, xgcp.Vertex(checkpoint_bucket="gs://ckpt-bucket", retry=xm.Retry(max_attempts=2))),
            worker=xm.Job(exe, xgcp.Vertex(requirements=xm.JobRequirements(replicas=2)))))
    exp = experiment.experiment_id
    [name] = vertex.jobs
    relaunched = _preempt_and_observe(vertex, exp, name)
    want = f"/gcs/ckpt-bucket/checkpoints/{exp}/1"
    for job, attempt in ((name, "1"), (relaunched, "2")):
        for pool in (0, 1):
            env = _env(vertex, job, pool)
            assert (env["XCORE_CHECKPOINT_DIR"], env["XCORE_ATTEMPT"]) == (want, attempt)


def test_a_job_group_whose_jobs_name_two_buckets_fails_to_launch_saying_so(vertex: Any, xcore_home):
    vertex.add_image(IMAGE, [sys.executable, "-c", "pass"])
    with pytest.raises(xm.ExperimentUnitError), xm.create_experiment("two-buckets") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        experiment.add(xm.JobGroup(chief=xm.Job(exe, xgcp.Vertex(checkpoint_bucket="gs://bucket-a")),
                                   worker=xm.Job(exe, xgcp.Vertex(checkpoint_bucket="gs://bucket-b"))))
    found = jobs(experiment.experiment_id)
    assert len(found) == 2 and all("different Vertex checkpoint buckets" in j.message for j in found)
    assert vertex.calls["create"] == 0


@pytest.mark.parametrize("where", ["executor", "job"])
def test_a_policy_that_retries_without_a_checkpoint_bucket_is_refused_at_add(vertex: Any, xcore_home, where):
    vertex.add_image(IMAGE, [sys.executable, "-c", "pass"])
    policy = xm.Retry(max_attempts=3, on=("preemption", "error"))
    with pytest.raises(xm.ConfigurationError) as caught, xm.create_experiment("no-bucket") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        if where == "executor":
            experiment.add(xm.Job(exe, xgcp.Vertex(retry=policy)))
        else:
            experiment.add(xm.Job(exe, xgcp.Vertex(), retry=policy))
    message = str(caught.value)
    assert "\n" not in message and "checkpoint_bucket='gs://BUCKET/PREFIX'" in message, message
    assert vertex.calls["create"] == 0 and jobs(experiment.experiment_id) == []


def test_without_a_bucket_the_default_policy_and_a_single_attempt_launch_with_no_checkpoint_dir(
        vertex: Any, xcore_home):
    vertex.add_image(IMAGE, [sys.executable, "-c", "pass"])
    vertex.auto_run = False
    with xm.create_experiment("plain") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        experiment.add(xm.Job(exe, xgcp.Vertex()))  # the default policy (preemption, 3 attempts)
        experiment.add(xm.Job(exe, xgcp.Vertex(), retry=xm.Retry(max_attempts=1)))
    assert len(vertex.jobs) == 2
    assert all(_env(vertex, name) == {"XCORE_ATTEMPT": "1"} for name in vertex.jobs)


@pytest.mark.parametrize("value", [
    "ckpt-bucket", "s3://ckpt-bucket", "gs://", "gs://Ckpt", "gs://ab", "gs://-bucket", "gs://bucket//runs",
    "gs://bucket/../runs", "gs://bucket/a\nb", "gs://" + "a" * 64 + ".b", 7,
])
def test_a_malformed_checkpoint_bucket_is_refused_at_construction(value):
    with pytest.raises(xm.ConfigurationError, match=r"Vertex\(checkpoint_bucket=.*expected 'gs://BUCKET'") as caught:
        xgcp.Vertex(checkpoint_bucket=value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("value", "path"), [
    ("gs://ckpt-bucket", "/gcs/ckpt-bucket/checkpoints/4/2"),
    ("gs://ckpt_bucket.example.com/team/runs/", "/gcs/ckpt_bucket.example.com/team/runs/checkpoints/4/2"),
])
def test_the_checkpoint_dir_is_the_bucket_s_cloud_storage_fuse_path(value, path):
    assert xgcp.Vertex(checkpoint_bucket=value).checkpoint_dir(4, 2) == path
