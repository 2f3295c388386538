"""The real kubernetes client against the fake API server: launch, status, cancel, logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import xk8s
from xcore import plugin as xp
from xcore.testing import make_launch_context, make_request
from xk8s import client, hooks

IMAGE = "registry.example/lab/train:1"


def exe(command=("python3", "-m", "train")):
    return xk8s.KubernetesExecutable(name="train", image=IMAGE, command=list(command))


def launch(tmp_path, requests):
    return hooks.KubernetesBackend().launch(requests, make_launch_context(tmp_path / "state"))


def states(handles):
    return hooks.KubernetesBackend().states(handles)


def sweep(n, executor=None, experiment_id=1):
    executor = executor or xk8s.Kubernetes(retries=1)
    return [make_request(exe(), executor, [f"--trial={i}"], {"TRIAL": str(i)}, experiment_id=experiment_id)
            for i in range(n)]


def test_single_job_is_one_job_with_inline_argv_and_no_configmap(fake_k8s, tmp_path):
    [handle] = launch(tmp_path, [make_request(exe(), xk8s.Kubernetes(), ["--lr", "0.1"], {"A": "b"})])
    job = fake_k8s.get("Job", "default", handle.name)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python3", "-m", "train", "--lr", "0.1"]
    assert container["env"][-1] == {"name": "A", "value": "b"}
    assert fake_k8s.list("ConfigMap", "default") == []
    assert fake_k8s.calls("POST") == 1
    assert states([handle])[0].status is xp.Status.PENDING
    fake_k8s.start(handle.name)
    assert states([handle])[0].status is xp.Status.RUNNING
    fake_k8s.finish(handle.name, 0, 0)
    assert states([handle])[0].status is xp.Status.COMPLETED


def test_sweep_of_100_is_one_indexed_job_and_one_failing_trial_does_not_fail_the_others(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(100, xk8s.Kubernetes(retries=1, max_parallel=100)))
    assert len({h.name for h in handles}) == 1 and [h.index for h in handles] == list(range(100))
    assert fake_k8s.calls("POST", "/jobs") == 1 and fake_k8s.calls("POST", "/configmaps") == 1
    job = fake_k8s.get("Job", "default", handles[0].name)
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["backoffLimitPerIndex"] == 1
    for i in range(100):
        fake_k8s.start(handles[0].name, i)
    for i in range(100):
        fake_k8s.finish(handles[0].name, i, 3 if i == 42 else 0)
    fake_k8s.start(handles[0].name, 42)  # the retry (backoffLimitPerIndex=1)
    assert "retry 1" in states([handles[42]])[0].message
    fake_k8s.finish(handles[0].name, 42, 3)
    fake_k8s.requests.clear()
    result = states(handles)
    assert fake_k8s.calls() == 2  # one LIST of Jobs, one of Pods
    assert [s.status for s in result].count(xp.Status.COMPLETED) == 99
    assert result[42].status is xp.Status.FAILED and result[42].exit_code == 3 and result[42].message == "exit code 3"


def test_reasons_oom_image_pull_unschedulable_preemption(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(4, xk8s.Kubernetes(retries=0)))
    name = handles[0].name
    fake_k8s.start(name, 0)
    fake_k8s.oom_kill(name, 0)
    fake_k8s.image_pull_backoff(name, 1)
    fake_k8s.unschedulable(name, 2)
    fake_k8s.start(name, 3)
    fake_k8s.preempt(name, 3)
    s = states(handles)
    assert s[0].status is xp.Status.FAILED and s[0].message.startswith("OOMKilled") and s[0].exit_code == 137
    assert s[1].status is xp.Status.PENDING and s[1].message.startswith("ImagePullBackOff: Back-off pulling image")
    assert s[2].status is xp.Status.PENDING and s[2].message.startswith("Unschedulable: 0/3 nodes")
    # preemption does not count against retries=0: the index gets a new pod
    assert len(fake_k8s.pods(name, 3)) == 2
    assert s[3].status is xp.Status.PENDING
    fake_k8s.start(name, 3)
    fake_k8s.finish(name, 3, 0)
    assert states(handles)[3].status is xp.Status.COMPLETED


def test_kueue_queue_labels_suspend_and_the_workloads_reason_until_admitted(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(3, xk8s.Kubernetes(queue="lab-queue", workload_priority="high")))
    name = handles[0].name
    job = fake_k8s.get("Job", "default", name)
    assert job["spec"]["suspend"] is True  # created suspended: Kueue unsuspends it when admitted
    labels = job["metadata"]["labels"]
    assert (labels["kueue.x-k8s.io/queue-name"], labels["kueue.x-k8s.io/priority-class"]) == ("lab-queue", "high")
    assert fake_k8s.workload(name)["spec"]["priorityClassName"] == "high"
    fake_k8s.requests.clear()
    result = states(handles)
    assert fake_k8s.calls() == 3  # Jobs, Pods, and the Workloads of the Jobs that wait
    assert [s.status for s in result] == [xp.Status.PENDING] * 3
    assert result[1].message == ("waiting for Kueue admission (queue lab-queue): Inadmissible: "
                                 "LocalQueue lab-queue doesn't exist")
    fake_k8s.admit(name)
    fake_k8s.requests.clear()
    assert [s.message for s in states(handles)] == ["pod pending"] * 3
    assert fake_k8s.calls() == 2  # nothing waits for Kueue: no Workload LIST
    fake_k8s.start(name, 0)
    fake_k8s.finish(name, 0, 0)
    assert states(handles)[0].status is xp.Status.COMPLETED


def test_kueue_without_quota_says_which_resource_is_short(fake_k8s, tmp_path):
    fake_k8s.create("LocalQueue", "default", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                                              "metadata": {"name": "lab-queue"}, "spec": {"clusterQueue": "lab"}})
    [handle] = launch(tmp_path, [make_request(exe(), xk8s.Kubernetes(queue="lab-queue"))])
    fake_k8s.workload(handle.name)
    [state] = states([handle])
    assert state.status is xp.Status.PENDING
    assert state.message.startswith("waiting for Kueue admission (queue lab-queue): Pending: couldn't assign "
                                    "flavors to pod set main: insufficient unused quota for nvidia.com/gpu")


def test_a_queued_job_group_waits_as_one_kueue_workload_then_runs(fake_k8s, tmp_path):
    queued = xk8s.Kubernetes(queue="lab-queue", workload_priority="high")
    reqs = [make_request(exe(), queued, [role], work_unit_id=1, job_name=role) for role in ("train", "eval")]
    handles = launch(tmp_path, reqs)
    name = handles[0].name
    jobset = fake_k8s.get("JobSet", "default", name)
    assert jobset["spec"]["suspend"] is True
    workload = fake_k8s.workload(name, kind="JobSet")  # one Workload for the whole set: gang admission
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("train", 1), ("eval", 1)]
    assert fake_k8s.list("Pod", "default") == []
    result = states(handles)
    assert [s.status for s in result] == [xp.Status.PENDING] * 2
    assert result[0].message == ("waiting for Kueue admission (queue lab-queue): Inadmissible: "
                                 "LocalQueue lab-queue doesn't exist")
    fake_k8s.admit(name, kind="JobSet")
    fake_k8s.start(f"{name}-train-0")
    assert [s.status for s in states(handles)] == [xp.Status.RUNNING, xp.Status.PENDING]


def test_no_right_to_read_workloads_is_said_instead_of_the_reason(fake_k8s, tmp_path):
    fake_k8s.forbidden.add("workloads")
    [handle] = launch(tmp_path, [make_request(exe(), xk8s.Kubernetes(queue="lab-queue"))])
    fake_k8s.workload(handle.name)
    [state] = states([handle])
    assert state.status is xp.Status.PENDING
    assert state.message == ("waiting for Kueue admission (queue lab-queue); not allowed to list Kueue Workloads in "
                             "default for the reason (grant list on workloads.kueue.x-k8s.io)")


def test_a_queued_job_without_a_workload_says_kueue_may_be_missing(fake_k8s, tmp_path):
    fake_k8s.paused = True  # Kueue has not seen the Job (or is not installed)
    [handle] = launch(tmp_path, [make_request(exe(), xk8s.Kubernetes(queue="lab-queue"))])
    assert "no Kueue Workload yet (is Kueue installed" in states([handle])[0].message


def test_deadline_exceeded(fake_k8s, tmp_path):
    [handle] = launch(tmp_path, [make_request(exe(), xk8s.Kubernetes(time_limit_secs=1))])
    fake_k8s.start(handle.name)
    deadline = time.monotonic() + 10
    while states([handle])[0].status is not xp.Status.FAILED and time.monotonic() < deadline:
        time.sleep(0.1)
    assert states([handle])[0].message.startswith("DeadlineExceeded")


def test_a_trial_over_its_time_limit_fails_alone_as_deadline_exceeded(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(3, xk8s.Kubernetes(time_limit_secs=1)))
    name = handles[0].name
    job = fake_k8s.get("Job", "default", name)
    assert "activeDeadlineSeconds" not in job["spec"]  # not the whole sweep's limit
    assert job["spec"]["template"]["spec"]["activeDeadlineSeconds"] == 1  # each trial's pod
    with fake_k8s.lock:  # the fake's kubelet cannot act in between, however loaded the machine
        fake_k8s.start(name, 0)
        fake_k8s.start(name, 1)
        fake_k8s.finish(name, 1, 0)
    deadline = time.monotonic() + 10
    while states(handles)[0].status is not xp.Status.FAILED and time.monotonic() < deadline:
        time.sleep(0.1)
    s = states(handles)
    assert s[0].status is xp.Status.FAILED and s[0].message.startswith(
        "DeadlineExceeded: the trial ran longer than its time limit (1 s"), s[0]
    assert fake_k8s.get("Job", "default", name)["status"]["failedIndexes"] == "0"
    assert [s[1].status, s[2].status] == [xp.Status.COMPLETED, xp.Status.PENDING]
    with fake_k8s.lock:  # trial 2 gets its own second, whenever it starts
        fake_k8s.start(name, 2)
        fake_k8s.finish(name, 2, 0)
    assert [x.status for x in states(handles)] == [xp.Status.FAILED, xp.Status.COMPLETED, xp.Status.COMPLETED]


def test_disruptions_are_retried_without_counting_and_exit_codes_are_not(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(2, xk8s.Kubernetes(retries=0)))
    name = handles[0].name
    fake_k8s.start(name, 0)
    fake_k8s.evict(name, 0)  # a node drain
    assert len(fake_k8s.pods(name, 0)) == 2  # a new pod although retries=0
    fake_k8s.start(name, 0)
    fake_k8s.preempt(name, 0)
    assert len(fake_k8s.pods(name, 0)) == 3
    assert states(handles)[0].message == "pod pending (retry 2)"
    fake_k8s.start(name, 0)
    fake_k8s.finish(name, 0, 0)
    fake_k8s.start(name, 1)
    fake_k8s.finish(name, 1, 1)  # the program's own failure
    assert len(fake_k8s.pods(name, 1)) == 1  # not retried
    s = states(handles)
    assert (s[0].status, s[0].exit_code) == (xp.Status.COMPLETED, 0)
    assert (s[1].status, s[1].exit_code) == (xp.Status.FAILED, 1)
    status = fake_k8s.get("Job", "default", name)["status"]
    assert (status["failed"], status["failedIndexes"]) == (1, "1")  # only the exit code counted


def test_an_evicted_pod_reads_evicted_until_it_is_replaced(fake_k8s, tmp_path):
    [handle] = launch(tmp_path, [make_request(exe(), xk8s.Kubernetes(), ["--x"])])
    fake_k8s.start(handle.name)
    fake_k8s.paused = True  # the Job controller has not replaced the pod yet
    fake_k8s.evict(handle.name)
    [state] = states([handle])
    assert state.status is xp.Status.PENDING
    assert state.message == "evicted (EvictionByEvictionAPI: Eviction API: evicting); will be retried"


def test_cancel_one_trial_leaves_the_others_running(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(3, xk8s.Kubernetes(retries=2)))
    name = handles[0].name
    for i in range(3):
        fake_k8s.start(name, i)
    hooks.KubernetesBackend().cancel([handles[1]])
    s = states(handles)
    assert [x.status for x in s] == [xp.Status.RUNNING, xp.Status.CANCELLED, xp.Status.RUNNING]
    assert json.loads(fake_k8s.get("ConfigMap", "default", name)["data"]["cancelled"]) == [1]
    # the Job controller replaces the deleted pod; the entrypoint sees the mark and exits 121:
    # the pod failure policy fails that index without retrying it
    fake_k8s.start(name, 1)
    fake_k8s.finish(name, 1, 121)
    assert "1" == fake_k8s.get("Job", "default", name)["status"]["failedIndexes"]
    assert len(fake_k8s.pods(name, 1)) == 1  # not retried again
    for i in (0, 2):
        fake_k8s.finish(name, i, 0)
    assert [x.status for x in states(handles)] == [xp.Status.COMPLETED, xp.Status.CANCELLED, xp.Status.COMPLETED]


def test_cancel_whole_sweep_deletes_the_job_in_background_and_reads_cancelled_later(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(3))
    fake_k8s.start(handles[0].name, 0)
    fake_k8s.finish(handles[0].name, 0, 0)
    fake_k8s.requests.clear()
    hooks.KubernetesBackend().cancel(handles)
    assert ("DELETE", f"/apis/batch/v1/namespaces/default/jobs/{handles[0].name}") in fake_k8s.requests
    assert fake_k8s.list("Job", "default") == [] and fake_k8s.list("ConfigMap", "default") == []
    assert fake_k8s.list("Pod", "default") == []
    s = states(handles)
    assert [x.status for x in s] == [xp.Status.COMPLETED, xp.Status.CANCELLED, xp.Status.CANCELLED]
    assert s[0].exit_code == 0  # kept from before the deletion
    hooks.KubernetesBackend().cancel(handles)  # harmless


def test_forgotten_job_reads_lost(fake_k8s, tmp_path):
    [handle] = launch(tmp_path, [make_request(exe(), xk8s.Kubernetes())])
    fake_k8s.delete("Job", "default", handle.name, "Background")
    [state] = states([handle])
    assert state.status is xp.Status.FAILED and state.message.startswith("lost: Job") and state.exit_code is None


def test_logs_of_the_right_pod_with_follow(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(2))
    name = handles[0].name
    fake_k8s.start(name, 0)
    fake_k8s.start(name, 1)
    fake_k8s.write_log(fake_k8s.pod(name, 1)["metadata"]["name"], "trial one ✓\n".encode())
    fake_k8s.write_log(fake_k8s.pod(name, 0)["metadata"]["name"], b"trial zero\n")
    assert "".join(hooks.KubernetesBackend().logs(handles[1], False)) == "trial one ✓\n"
    chunks = []
    follower = hooks.KubernetesBackend().logs(handles[0], True)
    chunks.append(next(follower))
    fake_k8s.write_log(fake_k8s.pod(name, 0)["metadata"]["name"], "more ✓\n".encode()[:4])
    fake_k8s.write_log(fake_k8s.pod(name, 0)["metadata"]["name"], "more ✓\n".encode()[4:])
    fake_k8s.finish(name, 0, 0)
    chunks.extend(follower)
    assert "".join(chunks) == "trial zero\nmore ✓\n"


def test_status_from_a_later_process(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(3, xk8s.Kubernetes()))
    fake_k8s.start(handles[0].name, 2)
    fake_k8s.finish(handles[0].name, 2, 5)
    payload = json.dumps([[h.context, h.namespace, h.name, h.index, h.launch] for h in handles])
    code = ("import json, sys; from xk8s import hooks; from xk8s.handles import KubernetesHandle as H\n"
            "hs = [H(*row) for row in json.loads(sys.argv[1])]\n"
            "print(json.dumps([[s.status.name, s.exit_code] for s in hooks.KubernetesBackend().states(hs)]))")
    out = subprocess.run([sys.executable, "-c", code, payload], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [["PENDING", None], ["PENDING", None], ["FAILED", 5]]


def test_a_trial_cancelled_elsewhere_reads_cancelled_from_a_fresh_process_and_store(fake_k8s, tmp_path):
    handles = launch(tmp_path, sweep(3, xk8s.Kubernetes(retries=2)))
    name = handles[0].name
    for i in range(3):
        fake_k8s.start(name, i)
    fake_k8s.finish(name, 2, 0)
    payload = json.dumps([[h.context, h.namespace, h.name, h.index, h.launch] for h in handles])

    def process(action):  # another machine: its own XCORE_HOME, nothing shared but the cluster
        code = ("import json, sys; from xk8s import hooks; from xk8s.handles import KubernetesHandle as H\n"
                "hs = [H(*row) for row in json.loads(sys.argv[1])]\n"
                "if sys.argv[2] == 'cancel': hooks.KubernetesBackend().cancel(hs[1:2])\n"
                "print(json.dumps([s.status.name for s in hooks.KubernetesBackend().states(hs)]))")
        env = {**os.environ, "XCORE_HOME": str(tmp_path / f"home-{action}")}
        out = subprocess.run([sys.executable, "-c", code, payload, action], capture_output=True, text=True,
                             env=env, check=True, timeout=120)
        return json.loads(out.stdout)

    assert process("cancel") == ["RUNNING", "CANCELLED", "COMPLETED"]
    assert process("status") == ["RUNNING", "CANCELLED", "COMPLETED"]
    assert [s.status for s in states(handles)] == [xp.Status.RUNNING, xp.Status.CANCELLED, xp.Status.COMPLETED]
    # the replacement pod sees the ConfigMap's mark and exits 121: a failed index, never retried
    fake_k8s.start(name, 1)
    fake_k8s.finish(name, 1, 121)
    fake_k8s.finish(name, 0, 0)
    assert process("status") == ["COMPLETED", "CANCELLED", "COMPLETED"]


def test_api_server_down_is_an_oserror_not_a_crash(fake_k8s, tmp_path):
    [handle] = launch(tmp_path, [make_request(exe(), xk8s.Kubernetes())])
    fake_k8s.close()
    client.api_client.cache_clear()
    with pytest.raises(OSError):
        states([handle])


def test_launch_into_a_missing_namespace_fails_with_the_api_message(fake_k8s, tmp_path):
    with pytest.raises(xp.LaunchError, match='namespaces "nope" not found'):
        launch(tmp_path, [make_request(exe(), xk8s.Kubernetes(namespace="nope"))])


def test_a_jobset_whose_jobs_are_not_created_yet_reads_pending_not_lost(fake_k8s, tmp_path):
    reqs = [make_request(exe(), xk8s.Kubernetes(), [role], work_unit_id=1, job_name=role) for role in ("a", "b")]
    fake_k8s.paused = True  # the JobSet controller has not run yet
    handles = launch(tmp_path, reqs)
    fake_k8s.requests.clear()
    result = states(handles)
    assert [s.status for s in result] == [xp.Status.PENDING] * 2, result
    assert "JobSet controller" in result[0].message
    assert fake_k8s.calls("GET", "/jobsets") == 1
    fake_k8s.paused = False
    fake_k8s.start(f"{handles[0].name}-a-0")
    assert states(handles)[0].status is xp.Status.RUNNING
    fake_k8s.delete("JobSet", "default", handles[0].name, "Background")
    assert states(handles)[1].message.startswith("lost: Job")


def test_a_job_group_key_that_cannot_name_a_role_is_refused(fake_k8s, tmp_path):
    reqs = sweep(2) + [make_request(exe(), xk8s.Kubernetes(), [], work_unit_id=99, job_name=name)
                       for name in ("ok", "not ok!")]
    with pytest.raises(xp.ConfigurationError, match="cannot name a JobSet role"):
        launch(tmp_path, reqs)
    assert fake_k8s.calls("POST") == 0


def test_a_configmap_that_cannot_be_created_leaves_no_job_behind(fake_k8s, tmp_path):
    fake_k8s.reject["ConfigMap"] = [(403, "Forbidden", 'configmaps is forbidden: User "x" cannot create')]
    with pytest.raises(xp.LaunchError, match="nothing was submitted.*forbidden"):
        launch(tmp_path, sweep(5))
    assert fake_k8s.calls("POST", "/jobs") == 1 and fake_k8s.calls("DELETE", "/jobs/") == 1
    assert fake_k8s.list("Job", "default") == [] and fake_k8s.list("Pod", "default") == []


def test_one_failed_group_of_a_batch_is_a_launch_failure_for_its_jobs_only(fake_k8s, tmp_path):
    fake_k8s.reject["Job"] = [(422, "Invalid", "Job.batch is invalid: quota exceeded")]
    first = sweep(2, xk8s.Kubernetes(retries=1))  # one Indexed Job: rejected
    second = sweep(2, xk8s.Kubernetes(retries=2))  # another executor: another Job, created
    result = launch(tmp_path, first + second)
    assert [type(r).__name__ for r in result] == ["LaunchFailure"] * 2 + ["KubernetesHandle"] * 2
    assert "quota exceeded" in result[0].reason
    assert len(fake_k8s.list("Job", "default")) == 1 and fake_k8s.calls("POST", "/jobs") == 2


def test_a_multi_slice_role_is_done_when_every_replica_is_and_failed_when_one_fails(fake_k8s, tmp_path):
    import xcore as xm

    tpu = xk8s.Kubernetes(requirements=xm.JobRequirements(tpu_v5e="2x4", num_slices=2))
    reqs = [make_request(exe(), tpu, [], work_unit_id=1, job_name="train"),
            make_request(exe(), xk8s.Kubernetes(), [], work_unit_id=1, job_name="eval")]
    train, evaluate = launch(tmp_path, reqs)
    for replica in (0, 1):
        fake_k8s.start(f"{train.name}-train-{replica}")
    assert states([train])[0].message.startswith("2/2 replicas running")
    fake_k8s.finish(f"{train.name}-train-0", 0, 0)
    assert states([train])[0].status is xp.Status.RUNNING
    fake_k8s.finish(f"{train.name}-train-1", 0, 0)
    [done] = states([train])
    assert (done.status, done.exit_code) == (xp.Status.COMPLETED, 0)
    fake_k8s.start(f"{evaluate.name}-eval-0")
    fake_k8s.oom_kill(f"{evaluate.name}-eval-0")
    assert states([evaluate])[0].message.startswith("OOMKilled")


def test_kueue_reasons_for_eviction_and_admission_checks():
    from xk8s import states as st

    job = {"metadata": {"uid": "u1", "labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {"suspend": True}}

    def workload(*conditions):
        return {"u1": {"status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m}
                                                 for t, s, r, m in conditions]}}}

    evicted = workload(("QuotaReserved", "False", "Pending", "no quota"),
                       ("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload"))
    assert st.kueue_reason(job, evicted) == ("evicted by Kueue (Preempted: Preempted to accommodate a higher priority "
                                             "Workload); waiting for Kueue admission (queue q)")
    checks = workload(("QuotaReserved", "True", "QuotaReserved", ""),
                      ("Admitted", "False", "NoChecks", "The workload has pending admission checks"))
    assert st.kueue_reason(job, checks) == ("waiting for Kueue admission (queue q): quota reserved, waiting for "
                                            "admission checks: The workload has pending admission checks")
    assert st.kueue_reason(job, workload()) == "waiting for Kueue admission (queue q): not yet considered by Kueue"
    assert st.kueue_reason({"metadata": {"labels": {}}, "spec": {"suspend": True}}, {}) == "suspended"


def test_shell_execs_kubectl_into_the_trials_pod(fake_k8s, tmp_path, monkeypatch):
    handles = launch(tmp_path, sweep(2))
    name = handles[0].name
    with pytest.raises(xp.XcoreError, match="has no running pod"):
        hooks.KubernetesBackend().shell(handles[1], None)
    fake_k8s.start(name, 1)
    pod = fake_k8s.pod(name, 1)["metadata"]["name"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(xp.XcoreError, match=rf"kubectl, which is not on PATH.*exec -i {pod} -c \S+ -- ls 'a b'"):
        hooks.KubernetesBackend().shell(handles[1], ["ls", "a b"])
    (bin_dir / "kubectl").write_text("#!/bin/sh\n")
    (bin_dir / "kubectl").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    shell = hooks.KubernetesBackend().shell(handles[1], ["ls", "a b"])
    from xk8s import manifests

    assert shell.argv[0] == "kubectl" and shell.argv[-6:] == (pod, "-c", manifests.CONTAINER, "--", "ls", "a b")
    assert shell.argv[shell.argv.index("-n") + 1] == handles[1].namespace


def test_a_distributed_single_job_is_a_jobset_of_one_role_with_its_ranks(fake_k8s, tmp_path):
    """docs/gangs.md: replicas=2 with distributed= runs both replicas together as one JobSet."""
    import xcore as xm

    executor = xk8s.Kubernetes(requirements=xm.JobRequirements(replicas=2), distributed="torch")
    [handle] = launch(tmp_path, [make_request(exe(), executor, ["--lr", "0.1"])])
    jobset = fake_k8s.get("JobSet", "default", handle.name)
    [role] = jobset["spec"]["replicatedJobs"]
    assert role["replicas"] == 2
    env = {e["name"]: e.get("value") for e in role["template"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == f"{handle.name}-{role['name']}-0-0.{handle.name}"
    assert (env["WORLD_SIZE"], env["RANK"]) == ("2", "$(XCORE_RANK)")
    assert states([handle])[0].status is xp.Status.PENDING
