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
