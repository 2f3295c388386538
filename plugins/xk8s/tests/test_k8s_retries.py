"""Retries on Kubernetes (issue #23): failure classes from Kubernetes' own signals, the retry
policy mapped onto backoffLimitPerIndex and the pod failure policy, attempts counted from the
pods an index had, all against the fake API server (tests/fake_apiserver.py)."""

from __future__ import annotations

import time

import xk8s
from xcore import plugin as xp
from xcore.testing import make_launch_context, make_request
from xk8s import hooks, states

IMAGE = "registry.example/lab/train:1"


def exe():
    return xk8s.KubernetesExecutable(name="train", image=IMAGE, command=["python3", "-m", "train"])


def launch(tmp_path, requests):
    return hooks.KubernetesBackend().launch(requests, make_launch_context(tmp_path / "state"))


def read(handles):
    return hooks.KubernetesBackend().states(handles)


def sweep(n, executor=None, **request):
    executor = executor or xk8s.Kubernetes()
    return [make_request(exe(), executor, [f"--trial={i}"], {"TRIAL": str(i)}, **request) for i in range(n)]


def wait_failed(handles, index, deadline_secs=10.0):
    deadline = time.monotonic() + deadline_secs
    while read(handles)[index].status is not xp.Status.FAILED and time.monotonic() < deadline:
        time.sleep(0.1)
    return read(handles)[index]


def test_failure_classes_from_kubernetes_signals(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(3, xk8s.Kubernetes(retry=xp.Retry(max_attempts=1))))
    name = handles[0].name
    for i in range(3):
        fake_k8s.start(name, i)
    fake_k8s.oom_kill(name, 0)
    fake_k8s.finish(name, 1, 3)
    fake_k8s.preempt(name, 2)  # the policy retries nothing: the index fails, as preempted
    s = read(handles)
    assert (s[0].status, s[0].failure, s[0].exit_code) == (xp.Status.FAILED, "out_of_memory", 137)
    assert (s[1].status, s[1].failure, s[1].exit_code) == (xp.Status.FAILED, "error", 3)
    assert (s[2].status, s[2].failure) == (xp.Status.FAILED, "preempted")
    assert s[2].message.startswith("preempted (PreemptionByScheduler")
    assert [x.attempt for x in s] == [1, 1, 1]


def test_a_trial_over_its_time_limit_reads_timeout(fake_k8s, tmp_path):
    [handle] = launch(tmp_path, sweep(1, xk8s.Kubernetes(time_limit_secs=1)))
    fake_k8s.start(handle.name)
    state = wait_failed([handle], 0)
    assert (state.failure, state.message.split(":")[0]) == ("timeout", "DeadlineExceeded")


def test_a_node_lost_and_a_pod_that_never_ran():
    node_gone = {"metadata": {"name": "p"}, "status": {"phase": "Failed", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]}}
    assert states.disruption_class(node_gone) == "node_failure"
    assert states.disruption_class({"status": {"phase": "Failed", "reason": "NodeLost"}}) == "node_failure"
    assert states.disruption_class({"status": {"phase": "Failed", "reason": "Evicted"}}) == "preempted"
    never_ran = {"status": {"phase": "Pending", "containerStatuses": [
        {"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}
    assert states.failure_class(never_ran, xp.JobState(xp.Status.FAILED, "x")) == "launch"
    job = {"metadata": {"name": "j"}, "spec": {}, "status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}}
    snap = states.Snapshot.of([job], [])
    assert states.state_of(snap, "j", 0).failure == "timeout"
    pulling = {"metadata": {"name": "j-0-a", "labels": {"job-name": "j"},
                            "annotations": {"batch.kubernetes.io/job-completion-index": "0"}}, **never_ran}
    job["status"]["conditions"][0]["reason"] = "BackoffLimitExceeded"
    assert states.state_of(states.Snapshot.of([job], [pulling]), "j", 0).failure == "launch"
