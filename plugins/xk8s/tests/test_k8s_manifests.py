"""Every manifest shape, validated strictly: batch/v1 and v1 against the official schemas
(kubernetes-validate, strict), JobSet and Kueue objects against their CRDs' openAPIV3Schema
(tests/schemas, read by tests/crd_schemas.py)."""

from __future__ import annotations

import json
from pathlib import Path

import crd_schemas
import jsonschema
import kubernetes_validate
import pytest
import yaml

import xcore as xm
import xk8s
from xcore import plugin as xp
from xk8s import manifests as mf

K8S_VERSIONS = ["1.31", "1.33"]
EXAMPLES = Path(__file__).parent.parent / "examples"

FULL = xk8s.Kubernetes(
    namespace="ml", requirements=xm.JobRequirements(cpu=3.5, memory="16GiB", ephemeral_storage="20GiB", a100=2),
    node_selector={"pool": "gpu"}, tolerations=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"},
                                                 xk8s.Toleration(key="spot", operator="Equal", value="true",
                                                                 effect="NoExecute", toleration_seconds=30)],
    service_account="trainer", image_pull_secrets=["regcred"], priority_class="high", queue="lab",
    workload_priority="urgent", time_limit_secs=3600, retries=2, ttl_after_finished_secs=86400,
    env_from_secrets={"WANDB_API_KEY": "wandb/key"}, max_parallel=8, labels={"team": "vision"},
    volumes=[xk8s.Volume(name="data", mount_path="/data", pvc="datasets", read_only=True),
             xk8s.Volume(name="shm", mount_path="/dev/shm", empty_dir=True, medium="Memory"),
             {"name": "cfg", "mount_path": "/etc/cfg", "config_map": "settings"}],
    image_pull_policy="IfNotPresent")
TPU = xk8s.Kubernetes(requirements=xm.JobRequirements(tpu_v5e="2x4", num_slices=2))
TRIALS = [(["python3", "-m", "train", f"--lr={lr}", "it's $HOME\n"], {"SEED": str(i), "Q": "\"x\""})
          for i, lr in enumerate((0.1, 0.01, 0.001))]


def validate_jobset(manifest: dict) -> None:
    crd_schemas.validate(manifest)
    # the embedded Job template must also be a valid batch/v1 JobSpec
    for rjob in manifest["spec"]["replicatedJobs"]:
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": rjob["template"]["spec"]}
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(job, version, strict=True)


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("executor", [xk8s.Kubernetes(), FULL, TPU], ids=["plain", "full", "tpu"])
@pytest.mark.parametrize("inline", [True, False], ids=["single", "sweep"])
def test_job_and_configmap_are_valid(version, executor, inline):
    trials = TRIALS[:1] if inline else TRIALS
    job, configmap = mf.indexed_job("xc-e1-u1-abcdef01", "ml", executor, "img:1", {mf.LABEL_LAUNCH: "abcdef01"},
                                    trials=trials, inline=inline)
    kubernetes_validate.validate(job, version, strict=True)
    if inline:
        assert configmap is None
    else:
        kubernetes_validate.validate(configmap, version, strict=True)


def test_the_validator_is_strict():
    job, _ = mf.indexed_job("x", "ml", xk8s.Kubernetes(), "img", {}, trials=TRIALS[:1], inline=True)
    job["spec"]["template"]["spec"]["containers"][0]["comand"] = ["typo"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.33", strict=True)
    bad = mf.jobset("x", "ml", [("main", xk8s.Kubernetes(), "img", ["a"], {})], {}, has_command=[True])
    bad["spec"]["replicatedJob"] = []
    with pytest.raises(jsonschema.ValidationError):
        validate_jobset(bad)
    nested = mf.jobset("x", "ml", [("main", xk8s.Kubernetes(), "img", ["a"], {})], {}, has_command=[True])
    nested["spec"]["replicatedJobs"][0]["replica"] = 2
    with pytest.raises(jsonschema.ValidationError, match="'replica' was unexpected"):
        validate_jobset(nested)
    wrong_type = mf.jobset("x", "ml", [("main", xk8s.Kubernetes(), "img", ["a"], {})], {}, has_command=[True])
    wrong_type["spec"]["suspend"] = "yes"
    with pytest.raises(jsonschema.ValidationError):
        validate_jobset(wrong_type)


@pytest.mark.parametrize("executor", [xk8s.Kubernetes(), FULL, TPU], ids=["plain", "full", "tpu"])
def test_jobset_is_valid(executor):
    manifest = mf.jobset("xc-e1-u1-abcdef01", "ml", [("server", executor, "img:1", ["serve", "--port=1"], {"A": "1"}),
                                                    ("worker", executor, "img:2", ["work"], {})],
                         {mf.LABEL_LAUNCH: "abcdef01"}, has_command=[True, False])
    validate_jobset(manifest)
    assert [r["name"] for r in manifest["spec"]["replicatedJobs"]] == ["server", "worker"]


def test_gpu_and_tpu_resources_and_selectors():
    res, selector = mf.resources(FULL)
    assert res == {"requests": {"cpu": "3500m", "memory": str(16 * 2**30), "ephemeral-storage": str(20 * 2**30),
                                "nvidia.com/gpu": "2"},
                   "limits": {"memory": str(16 * 2**30), "ephemeral-storage": str(20 * 2**30), "nvidia.com/gpu": "2"}}
    assert selector == {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
    res, selector = mf.resources(TPU)
    assert res["limits"] == {"google.com/tpu": "8"}
    assert selector == {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                        "cloud.google.com/gke-tpu-topology": "2x4"}
    job = mf.jobset("x", "ml", [("slice", TPU, "img", ["train"], {})], {}, has_command=[True])
    assert job["spec"]["replicatedJobs"][0]["replicas"] == 2  # num_slices


def test_pod_failure_policy_ignores_disruptions_and_does_not_retry_cancelled_trials():
    job, _ = mf.indexed_job("x", "ml", FULL, "img", {}, trials=TRIALS, inline=False)
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert rules[1]["action"] == "FailIndex" and rules[1]["onExitCodes"]["values"] == [mf.CANCELLED_EXIT_CODE]
    assert job["spec"]["parallelism"] == 3 and job["spec"]["completions"] == 3
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][:2] == ["python3", "-c"]


def test_sweeps_are_chunked_below_the_configmap_limit():
    trials = [(["python3", "x" * 1000, str(i)], {}) for i in range(2000)]
    chunks = mf.chunk_trials(trials)
    assert [i for c in chunks for i in c] == list(range(2000)) and len(chunks) == 3
    for chunk in chunks:
        size = sum(len(mf.trial_record(*trials[i]).encode()) for i in chunk)
        assert size < mf.CONFIGMAP_BUDGET
    assert [len(c) for c in mf.chunk_trials(trials[:10], max_trials=4)] == [4, 4, 2]
    with pytest.raises(xp.ConfigurationError, match="must fit"):
        mf.chunk_trials([(["x" * 1_000_000], {})])


def test_a_sweep_of_an_image_without_a_command_is_refused_with_the_fix():
    with pytest.raises(xp.ConfigurationError, match=r"xk8s.image\(IMAGE, command="):
        mf.indexed_job("x", "ml", FULL, "img", {}, trials=TRIALS, inline=False, has_command=False)


def test_a_queued_jobset_is_suspended_labelled_and_valid():
    queued = xk8s.Kubernetes(queue="lab-queue", workload_priority="high")
    manifest = mf.jobset("x", "ml", [("train", queued, "img", ["t"], {})], {}, has_command=[True])
    validate_jobset(manifest)
    assert manifest["spec"]["suspend"] is True
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lab-queue"
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"


def test_queue_labels_are_the_ones_kueue_reads():
    # kubernetes-sigs/kueue pkg/controller/constants/constants.go: QueueLabel, WorkloadPriorityClassLabel
    assert mf.queue_labels(xk8s.Kubernetes(queue="q", workload_priority="p")) == {
        "kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "p"}
    job, _ = mf.indexed_job("x", "ml", xk8s.Kubernetes(queue="q"), "img", {}, trials=TRIALS, inline=False)
    assert job["spec"]["suspend"] is True  # Kueue's webhook would suspend it anyway; created so, no pod starts early
    plain, _ = mf.indexed_job("x", "ml", xk8s.Kubernetes(), "img", {}, trials=TRIALS, inline=False)
    assert "suspend" not in plain["spec"]


def test_the_kueue_example_is_valid_for_the_kueue_crds():
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "kueue_queue.yaml").read_text()) if d]
    assert {d["kind"] for d in docs} == {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"}
    for doc in docs:
        crd_schemas.validate(doc)
    [queue] = [d for d in docs if d["kind"] == "LocalQueue"]
    queue["spec"]["clusterqueue"] = queue["spec"].pop("clusterQueue")  # misspelled
    with pytest.raises(jsonschema.ValidationError):
        crd_schemas.validate(queue)


def test_the_fakes_workload_is_valid_and_the_validator_rejects_a_misspelled_one(fake_k8s, tmp_path):
    from xcore.testing import make_launch_context, make_request
    from xk8s import hooks

    exe = xk8s.KubernetesExecutable(name="t", image="img", command=["python3", "-m", "t"])
    [handle] = hooks.KubernetesBackend().launch([make_request(exe, xk8s.Kubernetes(queue="q"))],
                                  make_launch_context(tmp_path))
    workload = {k: v for k, v in fake_k8s.workload(handle.name).items() if not k.startswith("_")}
    crd_schemas.validate(workload)
    workload["spec"]["podSets"][0]["cnt"] = workload["spec"]["podSets"][0].pop("count")
    with pytest.raises(jsonschema.ValidationError):
        crd_schemas.validate(workload)


def test_per_trial_time_limit_is_the_pods_active_deadline():
    job, _ = mf.indexed_job("x", "ml", FULL, "img", {}, trials=TRIALS, inline=False)
    assert job["spec"]["template"]["spec"]["activeDeadlineSeconds"] == 3600
    assert "activeDeadlineSeconds" not in job["spec"]
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(job, version, strict=True)


def _env(replicated_job: dict) -> list:
    return replicated_job["template"]["spec"]["template"]["spec"]["containers"][0]["env"]


@pytest.mark.parametrize("framework", ["torch", "jax", "tf"])
def test_jobset_roles_learn_hosts_and_replicas_their_framework_variables(framework):
    """docs/gangs.md: every role gets XCORE_JOB_HOSTS and XCORE_HOST_<ROLE> (pod DNS names under
    the JobSet's headless service); a distributed role's replicas get the rank from their pod's
    job-index annotation and the rest as values that refer to it."""
    trainer = xk8s.Kubernetes(requirements=xm.JobRequirements(replicas=2), distributed=xm.Distributed(framework))
    manifest = mf.jobset("xc-e1-u1-ab", "ml", [("trainer", trainer, "img:1", ["train"], {"A": "1"}),
                                               ("eval", xk8s.Kubernetes(), "img:1", ["eval"], {})],
                         {}, has_command=[True, True])
    validate_jobset(manifest)
    trainer_env, eval_env = (_env(r) for r in manifest["spec"]["replicatedJobs"])
    hosts = {"trainer": ["xc-e1-u1-ab-trainer-0-0.xc-e1-u1-ab", "xc-e1-u1-ab-trainer-1-0.xc-e1-u1-ab"],
             "eval": ["xc-e1-u1-ab-eval-0-0.xc-e1-u1-ab"]}
    values = {e["name"]: e.get("value") for e in eval_env}
    assert json.loads(values["XCORE_JOB_HOSTS"]) == hosts and values["XCORE_HOST_TRAINER"] == hosts["trainer"][0]
    assert "XCORE_RANK" not in values  # not distributed
    assert trainer_env[0] == {"name": "XCORE_RANK", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['jobset.sigs.k8s.io/job-index']"}}}
    values = {e["name"]: e.get("value") for e in trainer_env[1:]}
    assert values["XCORE_WORLD_SIZE"] == "2" and values["A"] == "1"
    master = hosts["trainer"][0]
    if framework == "torch":
        assert (values["MASTER_ADDR"], values["MASTER_PORT"], values["WORLD_SIZE"], values["RANK"]) == (
            master, "29500", "2", "$(XCORE_RANK)")
    elif framework == "jax":
        assert (values["JAX_COORDINATOR_ADDRESS"], values["JAX_NUM_PROCESSES"], values["JAX_PROCESS_ID"]) == (
            f"{master}:29500", "2", "$(XCORE_RANK)")
    else:
        assert values["TF_CONFIG"] == json.dumps({"cluster": {"worker": [f"{h}:29500" for h in hosts["trainer"]]},
                                                  "task": {"type": "worker", "index": 0}},
                                                 separators=(",", ":")).replace('"index":0', '"index":$(XCORE_RANK)')
