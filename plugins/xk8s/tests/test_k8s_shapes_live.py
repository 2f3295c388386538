"""Shapes the fake's kubelet really runs: hostile arguments through a sweep's ConfigMap and
entrypoint, a JobGroup as one JobSet, cancel of one running trial, and the check command."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import xk8s
from xcore import plugin as xp
from xcore.testing import make_launch_context, make_request
from xcore.testing.contract import HOSTILE_ARGS, HOSTILE_ENV
from xk8s import hooks

ECHO = ["python3", "-c", "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ.get('H')]))"]


def wait(handles, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        result = hooks.KubernetesBackend().states(handles)
        if all(s.status.is_terminal for s in result) or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def logs(handle):
    return "".join(hooks.KubernetesBackend().logs(handle, False))


def test_hostile_arguments_and_env_reach_every_trial_of_a_sweep_byte_for_byte(fake_k8s_run, tmp_path):
    exe = xk8s.KubernetesExecutable(name="echo", image="img", command=ECHO)
    reqs = [make_request(exe, xk8s.Kubernetes(), [*HOSTILE_ARGS, str(i)], {"H": HOSTILE_ENV + str(i)})
            for i in range(3)]
    handles = hooks.KubernetesBackend().launch(reqs, make_launch_context(tmp_path))
    assert len({h.name for h in handles}) == 1  # one Indexed Job
    assert all(s.status is xp.Status.COMPLETED for s in wait(handles))
    for i, h in enumerate(handles):
        assert json.loads(logs(h)) == [[*HOSTILE_ARGS, str(i)], HOSTILE_ENV + str(i)]


def test_job_group_is_one_jobset_with_a_job_per_role(fake_k8s_run, tmp_path):
    exe = xk8s.KubernetesExecutable(name="echo", image="img", command=ECHO)
    reqs = [make_request(exe, xk8s.Kubernetes(), [role], {"H": role}, work_unit_id=1, job_name=role)
            for role in ("server", "worker")]
    handles = hooks.KubernetesBackend().launch(reqs, make_launch_context(tmp_path))
    assert [(h.shape, h.role) for h in handles] == [("jobset", "server"), ("jobset", "worker")]
    assert fake_k8s_run.calls("POST") == 1 and len(fake_k8s_run.list("JobSet", "default")) == 1
    assert all(s.status is xp.Status.COMPLETED for s in wait(handles))
    assert json.loads(logs(handles[1])) == [["worker"], "worker"]
    hooks.KubernetesBackend().cancel(handles)  # ended: left alone
    assert len(fake_k8s_run.list("JobSet", "default")) == 1


def test_cancel_one_running_trial_of_a_live_sweep(fake_k8s_run, tmp_path):
    program = "import sys, time; time.sleep(float(sys.argv[1]))"
    exe = xk8s.KubernetesExecutable(name="sleep", image="img", command=["python3", "-c", program])
    reqs = [make_request(exe, xk8s.Kubernetes(retries=3), [seconds]) for seconds in ("0.5", "60")]
    handles = hooks.KubernetesBackend().launch(reqs, make_launch_context(tmp_path))
    deadline = time.monotonic() + 30
    while hooks.KubernetesBackend().states(handles[1:])[0].status is not xp.Status.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    hooks.KubernetesBackend().cancel([handles[1]])
    result = wait(handles)
    assert [s.status for s in result] == [xp.Status.COMPLETED, xp.Status.CANCELLED]
    # the replacement pod saw the cancel mark and exited without running the trial again
    deadline = time.monotonic() + 30
    while fake_k8s_run.get("Job", "default", handles[0].name)["status"].get("failedIndexes") != "1":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert "was cancelled" in logs(handles[1])


def test_a_running_trial_over_its_time_limit_is_killed_and_the_others_finish(fake_k8s_run, tmp_path):
    program = "import sys, time; print('start', flush=True); time.sleep(float(sys.argv[1]))"
    exe = xk8s.KubernetesExecutable(name="sleep", image="img", command=["python3", "-c", program])
    # the limit leaves room for two interpreter starts (entrypoint, then the trial) on a loaded machine
    reqs = [make_request(exe, xk8s.Kubernetes(time_limit_secs=8), [seconds]) for seconds in ("120", "0", "0")]
    handles = hooks.KubernetesBackend().launch(reqs, make_launch_context(tmp_path))
    started = time.monotonic()
    result = wait(handles, timeout=60)
    assert time.monotonic() - started < 60  # not the 120 s the first trial wanted
    assert result[0].status is xp.Status.FAILED and result[0].message.startswith("DeadlineExceeded"), result[0]
    assert [s.status for s in result[1:]] == [xp.Status.COMPLETED, xp.Status.COMPLETED]
    assert "start" in logs(handles[0])
    assert fake_k8s_run.processes == {}  # the killed process was reaped


def test_check_command_reports_each_check(fake_k8s, tmp_path):
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "k8s.toml").write_text('[targets.lab]\ncontext = "fake"\nnamespace = "default"\n')
    run = [sys.executable, "-m", "xcore.cli.main", "k8s", "check", "lab"]
    out = subprocess.run(run, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok   API server: Kubernetes v1.33.0-xk8s-fake" in out.stdout and "ok   read pod logs" in out.stdout
    fake_k8s.denied.add(("delete", "jobs"))
    out = subprocess.run([*run, "--json"], capture_output=True, text=True, check=False)
    assert out.returncode == 1
    failed = [c for c in json.loads(out.stdout)["checks"] if not c["ok"]]
    assert [c["check"] for c in failed] == ["delete jobs"] and "not allowed" in failed[0]["detail"]


def test_check_verifies_the_targets_kueue_local_queue(fake_k8s, tmp_path):
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "k8s.toml").write_text('[targets.lab]\ncontext = "fake"\nqueue = "lab-queue"\n')
    run = [sys.executable, "-m", "xcore.cli.main", "k8s", "check", "lab", "--json"]
    out = subprocess.run(run, capture_output=True, text=True, check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    [failed] = [c for c in json.loads(out.stdout)["checks"] if not c["ok"]]
    assert failed["check"] == "Kueue queue" and "no Kueue LocalQueue lab-queue in namespace default" in failed["detail"]
    fake_k8s.create("LocalQueue", "default", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                                              "metadata": {"name": "lab-queue"}, "spec": {"clusterQueue": "lab"}})
    out = subprocess.run(run, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout
    [queue] = [c for c in json.loads(out.stdout)["checks"] if c["check"] == "Kueue queue"]
    assert queue["detail"] == "Kueue LocalQueue lab-queue exists (ClusterQueue lab)"
    fake_k8s.denied.add(("list", "workloads"))
    out = subprocess.run(run, capture_output=True, text=True, check=False)
    assert [c["check"] for c in json.loads(out.stdout)["checks"] if not c["ok"]] == ["list Kueue workloads"]


def test_examples_launch_through_the_core_as_one_indexed_job_and_one_jobset(fake_k8s, tmp_path):
    import os
    from pathlib import Path

    examples = Path(__file__).parent.parent / "examples"
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "k8s.toml").write_text('[targets.gke]\ncontext = "fake"\nnamespace = "default"\n')
    env = {**os.environ, "XCORE_HOME": str(tmp_path / "home"), "XCORE_QUIET": "1"}
    for script in ("gke_gpu_sweep.py", "tpu_jobset.py"):
        out = subprocess.run([sys.executable, str(examples / script)], capture_output=True, text=True, env=env,
                             check=False, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
    [job] = [j for j in fake_k8s.list("Job", "default")
             if "jobset.sigs.k8s.io/jobset-name" not in j["metadata"]["labels"]]
    assert job["spec"]["completions"] == 100 and job["spec"]["parallelism"] == 20
    assert len(fake_k8s.list("ConfigMap", "default")) == 1
    [jobset] = fake_k8s.list("JobSet", "default")
    assert [(r["name"], r["replicas"]) for r in jobset["spec"]["replicatedJobs"]] == [("train", 2), ("eval", 1)]
    assert fake_k8s.calls("POST") == 3
