"""Retries on Kubernetes (issue #23): failure classes from Kubernetes' own signals, the retry
policy mapped onto backoffLimitPerIndex and the pod failure policy, attempts counted from the
pods an index had, all against the fake API server (tests/fake_apiserver.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import attrs
import kubernetes_validate
import pytest

import xk8s
from xcore import plugin as xp
from xcore.testing import make_launch_context, make_request
from xk8s import hooks, states
from xk8s import manifests as mf

IMAGE = "registry.example/lab/train:1"
#: A policy that retries needs a checkpoint volume (tests/test_k8s_attempt.py).
CKPT = {"volumes": [xk8s.Volume(name="ckpt", mount_path="/ckpt", pvc="checkpoints")], "checkpoint_volume": "ckpt"}


def exe():
    return xk8s.KubernetesExecutable(name="train", image=IMAGE, command=["python3", "-m", "train"])


def launch(tmp_path, requests):
    return hooks.KubernetesBackend().launch(requests, make_launch_context(tmp_path / "state"))


def read(handles):
    return hooks.KubernetesBackend().states(handles)


def sweep(n, executor=None, attempt=1):
    executor = executor or xk8s.Kubernetes()
    return [attrs.evolve(make_request(exe(), executor, [f"--trial={i}"], {"TRIAL": str(i)}), attempt=attempt)
            for i in range(n)]


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


def test_a_disruption_is_retried_and_not_counted_and_the_job_completes(fake_k8s, tmp_path):
    [handle] = launch(tmp_path, sweep(1))  # the default policy: preemption and node failure, 3 attempts
    fake_k8s.start(handle.name)
    for _ in range(3):  # more disruptions than attempts: none counts against the limit
        fake_k8s.preempt(handle.name)
        fake_k8s.start(handle.name)
    state = read([handle])[0]
    assert state.status is xp.Status.RUNNING and "(retry 3)" in state.message and state.attempt == 4
    assert [(a.number, a.status, a.failure) for a in state.previous_attempts] == [
        (n, xp.Status.FAILED, "preempted") for n in (1, 2, 3)]
    pod = fake_k8s.pod(handle.name)
    annotations = pod["metadata"]["annotations"]
    assert (annotations["batch.kubernetes.io/job-index-failure-count"],
            annotations["batch.kubernetes.io/job-index-ignored-failure-count"]) == ("0", "3")
    fake_k8s.finish(handle.name, 0, 0)
    state = read([handle])[0]
    assert (state.status, state.failure) == (xp.Status.COMPLETED, None)
    status = fake_k8s.get("Job", "default", handle.name)["status"]
    assert status.get("failed", 0) == 0 and status["completedIndexes"] == "0"


def test_a_program_error_with_the_default_policy_is_not_retried(fake_k8s, tmp_path):
    [handle] = launch(tmp_path, sweep(1))
    fake_k8s.start(handle.name)
    fake_k8s.finish(handle.name, 0, 1)
    assert len(fake_k8s.pods(handle.name, 0)) == 1  # no second pod
    state = read([handle])[0]
    assert (state.status, state.failure, state.exit_code, state.attempt) == (xp.Status.FAILED, "error", 1, 1)


def test_exit_codes_the_policy_retries_are_retried_by_kubernetes_up_to_max_attempts(fake_k8s, tmp_path):
    policy = xp.Retry(max_attempts=3, exit_codes=(75,))
    [retried, other] = launch(tmp_path, sweep(2, xk8s.Kubernetes(retry=policy, **CKPT), attempt=2))
    name = retried.name
    job = fake_k8s.get("Job", "default", name)
    assert job["spec"]["backoffLimitPerIndex"] == 2
    for _ in range(3):
        fake_k8s.start(name, 0)
        fake_k8s.finish(name, 0, 75)
    fake_k8s.start(name, 1)
    fake_k8s.finish(name, 1, 3)  # not a code the policy retries: the index fails at once
    assert (len(fake_k8s.pods(name, 0)), len(fake_k8s.pods(name, 1))) == (3, 1)
    s = read([retried, other])
    # attempts count on from the submission's (an `xcore retry` of attempt 1): 2, 3, 4
    assert (s[0].status, s[0].failure, s[0].exit_code, s[0].attempt) == (xp.Status.FAILED, "error", 75, 4)
    assert [(a.number, a.failure, a.exit_code) for a in s[0].previous_attempts] == [(2, "error", 75), (3, "error", 75)]
    assert (s[1].status, s[1].exit_code, s[1].attempt) == (xp.Status.FAILED, 3, 2)


def test_the_program_sees_its_attempt_after_kubernetes_replaced_its_pod(fake_k8s_run, tmp_path):
    program = ("import os, time\n"
               "print('attempt', os.environ['XCORE_ATTEMPT'], flush=True)\n"
               "time.sleep(60 if os.environ['XCORE_ATTEMPT'] == '1' else 0)\n")
    executable = xk8s.KubernetesExecutable(name="a", image=IMAGE, command=[sys.executable, "-c", program])
    requests = [make_request(executable, xk8s.Kubernetes(), [], {"TRIAL": str(i)}) for i in range(2)]
    handles = launch(tmp_path, requests)  # two trials: the sweep's entrypoint adds the attempt up
    name = handles[0].name
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (fake_k8s_run.pod(name, 0)["status"].get("phase") != "Running"):
        time.sleep(0.05)
    fake_k8s_run.preempt(name, 0)
    while time.monotonic() < deadline and read(handles)[0].status is not xp.Status.COMPLETED:
        time.sleep(0.1)
    assert read(handles)[0].status is xp.Status.COMPLETED
    logs = [fake_k8s_run.pod_log("default", p["metadata"]["name"]) for p in fake_k8s_run.pods(name, 0)]
    assert logs[-1].strip() == b"attempt 2"


POLICIES = {
    "default": None,
    "never": xp.Retry(max_attempts=1),
    "codes": xp.Retry(max_attempts=4, on=("timeout",), exit_codes=(75, 3)),
    "errors": xp.Retry(max_attempts=5, on=("preemption", "error")),
    "oom": xp.Retry(max_attempts=2, on=("out_of_memory",)),
}


def _rules(spec):
    return {(r["action"], r.get("onExitCodes", {}).get("operator"), tuple(r.get("onExitCodes", {}).get("values", ())),
             bool(r.get("onPodConditions"))) for r in spec["podFailurePolicy"]["rules"]}


@pytest.mark.parametrize("name", list(POLICIES))
@pytest.mark.parametrize("inline", [True, False], ids=["single", "sweep"])
def test_manifests_carry_the_mapped_policy_and_are_valid(name, inline):
    from test_k8s_manifests import K8S_VERSIONS, TRIALS, validate_jobset

    policy = POLICIES[name]
    trials = TRIALS[:1] if inline else TRIALS
    job, _ = mf.indexed_job("x", "ml", xk8s.Kubernetes(), "img", {}, trials=trials, inline=inline, retry=policy,
                            attempts=[2] * len(trials))
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(job, version, strict=True)
    spec = job["spec"]
    cancelled = ("FailIndex", "In", (mf.CANCELLED_EXIT_CODE,), False)
    expected = {
        "default": (2, {("Ignore", None, (), True), cancelled, ("FailIndex", "NotIn", (0,), False)}),
        "never": (0, {("FailIndex", None, (), True), cancelled, ("FailIndex", "NotIn", (0,), False)}),
        "codes": (3, {("FailIndex", None, (), True), cancelled, ("FailIndex", "NotIn", (0, 3, 75), False)}),
        "errors": (4, {("Ignore", None, (), True), cancelled}),  # every exit code counts
        "oom": (1, {("FailIndex", None, (), True), cancelled, ("FailIndex", "NotIn", (0, 137), False)}),
    }[name]
    assert (spec["backoffLimitPerIndex"], _rules(spec)) == expected
    container = spec["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["XK8S_INDEX_FAILURES"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"
    assert ("XK8S_FIRST_ATTEMPT" in env) is inline  # a sweep's trials carry theirs in their record

    roles = [("a", xk8s.Kubernetes(), "img", ["a"], {}), ("b", xk8s.Kubernetes(), "img", ["b"], {})]
    jobset = mf.jobset("x", "ml", roles, {}, has_command=[True, True], retry=policy)
    validate_jobset(jobset)
    failure = jobset["spec"]["failurePolicy"]
    assert failure["maxRestarts"] == expected[0]
    assert failure["rules"] == [{"name": "not-retried", "action": "FailJobSet",
                                 "onJobFailureReasons": ["PodFailurePolicy"]}]
    role = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert role["backoffLimitPerIndex"] == 0  # the set restarts as a whole, not one pod of it
    role_env = {e["name"] for e in role["template"]["spec"]["containers"][0]["env"]}
    assert {"XK8S_FIRST_ATTEMPT", "XK8S_INDEX_FAILURES", "XK8S_JOBSET_RESTARTS"} <= role_env
    assert {r[0] for r in _rules(role)} <= {"FailJob", "Ignore"}


def test_the_executors_own_retries_count_every_failure():
    job, _ = mf.indexed_job("x", "ml", xk8s.Kubernetes(retries=5), "img", {}, trials=[(["a"], {})], inline=True)
    assert job["spec"]["backoffLimitPerIndex"] == 5
    assert [r["action"] for r in job["spec"]["podFailurePolicy"]["rules"]] == ["Ignore", "FailIndex"]


def test_through_the_store_a_preempted_trial_completes_as_attempt_2_and_a_spent_policy_is_not_relaunched(
        fake_k8s, tmp_path, monkeypatch):
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_QUIET", "1")
    monkeypatch.delenv("XCORE_STORE", raising=False)
    script = tmp_path / "launch.py"
    script.write_text("""
import xcore as xm
import xk8s

with xm.create_experiment("k8s retries") as e:
    [exe] = e.package([xk8s.image("img", ["python3", "-m", "train"])])
    e.add(xm.Job(exe, xk8s.Kubernetes(), args=["--a"]))
    ckpt = xk8s.Kubernetes(volumes=[xk8s.Volume(name="ckpt", mount_path="/ckpt", pvc="ckpt")], checkpoint_volume="ckpt")
    e.add(xm.Job(exe, ckpt, args=["--b"], retry=xm.Retry(max_attempts=2, exit_codes=(75,))))
""")
    assert _cli("launch", str(script)).returncode == 0
    by_limit = {j["spec"]["backoffLimitPerIndex"]: j["metadata"]["name"] for j in fake_k8s.list("Job", "default")}
    plain, policy = by_limit[2], by_limit[1]  # the default policy: 3 attempts; the job's own: 2
    fake_k8s.start(plain)
    fake_k8s.preempt(plain)
    fake_k8s.start(plain)
    fake_k8s.finish(plain, 0, 0)
    for _ in range(2):
        fake_k8s.start(policy)
        fake_k8s.finish(policy, 0, 75)
    for _ in range(2):  # observers see the spent policy and relaunch nothing
        a, b = (unit["jobs"][0] for unit in _show()["work_units"])
    assert (a["status"], a["attempt"], [x["failure"] for x in a["attempts"]]) == ("COMPLETED", 2, ["preempted", None])
    assert (b["status"], b["failure"], b["attempt"]) == ("FAILED", "error", 2)
    assert len(fake_k8s.list("Job", "default")) == 2


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def _show():
    shown = _cli("show", "1", "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_the_checkpoint_volume_gives_each_work_unit_its_directory(fake_k8s, tmp_path):
    volumes = [xk8s.Volume(name="ckpt", mount_path="/ckpt", pvc="checkpoints"),
               xk8s.Volume(name="data", mount_path="/data", pvc="datasets", read_only=True)]
    executor = xk8s.Kubernetes(volumes=volumes, checkpoint_volume="ckpt")
    requests = [make_request(exe(), executor, [f"--trial={i}"], experiment_id=7, work_unit_id=i + 1)
                for i in range(2)]
    handles = launch(tmp_path, requests)
    [configmap] = fake_k8s.list("ConfigMap", "default")
    assert [json.loads(configmap["data"][str(i)])["env"]["XCORE_CHECKPOINT_DIR"] for i in range(2)] == [
        "/ckpt/checkpoints/7/1", "/ckpt/checkpoints/7/2"]
    assert "os.makedirs(" in fake_k8s.get("Job", "default", handles[0].name)["spec"]["template"]["spec"][
        "containers"][0]["command"][2]  # the sweep's entrypoint creates it (0700)
    [single] = launch(tmp_path, [make_request(exe(), executor, experiment_id=7, work_unit_id=3)])
    env = fake_k8s.get("Job", "default", single.name)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "XCORE_CHECKPOINT_DIR", "value": "/ckpt/checkpoints/7/3"} in env
    for bad in ("nope", "data"):
        with pytest.raises(xp.ConfigurationError, match="checkpoint_volume=.*not read-only"):
            xk8s.Kubernetes(volumes=volumes, checkpoint_volume=bad)
