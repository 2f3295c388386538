"""Arguments and env values reach a single job's or a JobGroup role's program byte for byte,
although the kubelet expands ``$(NAME)`` and ``$$`` in a container's command, args and env values:
xk8s writes every ``$`` of them doubled (``manifests.literal``), and its own ``$(XCORE_RANK)``
still gives each replica its rank. The fake kubelet expands as Kubernetes does (``xcore.testing.expansion``)."""

from __future__ import annotations

import json
import sys
import time

import attrs
import kubernetes_validate
import pytest

import xcore as xm
import xk8s
from xcore import plugin as xp
from xcore.testing import make_launch_context, make_request
from xcore.testing.expansion import expand
from xk8s import hooks
from xk8s import manifests as mf

#: ``$(XCORE_ATTEMPT)``, ``$(XK8S_FIRST_ATTEMPT)``, ``$(USER_VAR)`` and ``$(JOB_COMPLETION_INDEX)``
#: name variables the container defines; the kubelet would replace them, and ``$$``.
DOLLARS = ["$(HOME)", "$(XCORE_ATTEMPT)", "$(XK8S_FIRST_ATTEMPT)", "$(USER_VAR)", "$(JOB_COMPLETION_INDEX)",
           "$$", "$$$", "$$$$", "$(", "$", "trailing $", "price=$$5", "a$$b", "$$(USER_VAR)", "$(USER_VAR",
           "$($(USER_VAR))", "${USER_VAR}", "$()", "$HOME", "two words", "it's", '"quoted"', "a\nb", "",
           "ünïcødé ✓ 日本語 $(USER_VAR) $$ 🎉"]
ENV = {"USER_VAR": "defined", "E_REF": "$(USER_VAR)", "E_ATTEMPT": "$(XCORE_ATTEMPT)",
       "E_FIRST": "$(XK8S_FIRST_ATTEMPT)", "E_HOME": "$(HOME)", "E_DOLLARS": "$$ $$$ $( $ price=$$5 a$$b end$",
       "E_TEXT": "line1\nline2 'q' \"dq\" 日本 $(USER_VAR)\\"}
SHOW = ("import json, os, sys; names = sys.argv[1].split(','); "
        "print(json.dumps([sys.argv[2:], {k: os.environ.get(k) for k in names}]))")
CKPT = {"volumes": [xk8s.Volume(name="ckpt", mount_path="/ckpt", pvc="checkpoints")], "checkpoint_volume": "ckpt"}


@pytest.mark.parametrize(("text", "expanded"), [
    ("$(VAR)", "v"), ("$(VAR)$(VAR)", "vv"), ("a$(VAR)b", "avb"), ("$(UNDEFINED)", "$(UNDEFINED)"),
    ("$$(VAR)", "$(VAR)"), ("$$$(VAR)", "$v"), ("$$", "$"), ("$$$", "$$"), ("$$$$", "$$"), ("$", "$"),
    ("end$", "end$"), ("$(VAR", "$(VAR"), ("$($(VAR)", "$($(VAR)"), ("$($$", "$($"), ("${VAR}", "${VAR}"),
    ("$VAR", "$VAR"), ("$()", "$()"), ("$é$(VAR)", "$év"), ("no dollar", "no dollar"), ("", ""),
])
def test_the_fake_kubelet_expands_as_kubernetes(text, expanded):
    """Kubernetes' rules (third_party/forked/golang/expansion), the fake's kubelet and the checks
    below rely on them: ``$(NAME)`` of a defined name, ``$$`` -> ``$``, any other ``$`` kept."""
    assert expand(text, {"VAR": "v"}) == expanded


def test_literal_words_come_back_exactly_whatever_the_variables():
    defined = {name: "EXPANDED" for name in ("HOME", "XCORE_ATTEMPT", "XK8S_FIRST_ATTEMPT", "USER_VAR",
                                             "JOB_COMPLETION_INDEX", "", "$(USER_VAR")}
    texts = [*DOLLARS, *ENV.values(), mf.ATTEMPT_SCRIPT, mf.ENTRYPOINT, "$" * 7, "($)" * 3]
    assert [expand(mf.literal(text), defined) for text in texts] == texts
    assert sum(expand(text, defined) != text for text in texts) >= 10  # as they are, many would change


def containers(manifest):
    """The containers of a Job's or a JobSet's pods."""
    if manifest["kind"] == "Job":
        return [manifest["spec"]["template"]["spec"]["containers"][0]]
    return [rj["template"]["spec"]["template"]["spec"]["containers"][0] for rj in manifest["spec"]["replicatedJobs"]]


@pytest.mark.parametrize("executor", [
    xk8s.Kubernetes(),
    xk8s.Kubernetes(retry=xp.Retry(max_attempts=1)),  # XCORE_ATTEMPT a plain value in the container's env
    xk8s.Kubernetes(retry=xp.Retry(max_attempts=2), **CKPT),  # through the attempt wrapper
], ids=["no-policy", "plain-attempt", "wrapper"])
def test_the_manifests_hold_every_dollar_doubled(executor):
    job, _ = mf.indexed_job("x", "ml", executor, "img", {}, trials=[(["prog", *DOLLARS], ENV)], inline=True,
                            retry=executor.retry)
    kubernetes_validate.validate(job, "1.33", strict=True)
    roles = [("a", executor, "img", ["prog", *DOLLARS], ENV), ("b", executor, "img", ["prog", *DOLLARS], ENV)]
    jobset = mf.jobset("x", "ml", roles, {}, has_command=[True, False], retry=executor.retry)
    from test_k8s_manifests import validate_jobset

    validate_jobset(jobset)
    for container in [*containers(job), *containers(jobset)]:
        defined = {e["name"]: "EXPANDED" for e in container["env"]}  # whatever their values
        words = [expand(word, defined) for word in [*container.get("command", []), *container.get("args", [])]]
        assert words[-len(DOLLARS):] == DOLLARS
        values = {e["name"]: expand(e["value"], defined) for e in container["env"] if "value" in e}
        assert {k: values[k] for k in ENV} == ENV


def wait(handles, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = hooks.KubernetesBackend().states(handles)
        if all(s.status.is_terminal for s in states):
            return states
        time.sleep(0.1)
    raise AssertionError(f"not done in {timeout} s: {hooks.KubernetesBackend().states(handles)}")


def shown(cluster, job):
    """What the program printed in the Job's pod (index 0)."""
    [pod] = cluster.pods(job, 0)
    return json.loads(cluster.pod_log("default", pod["metadata"]["name"]))


def program():
    return xk8s.KubernetesExecutable(name="show", image="img", command=[sys.executable, "-c", SHOW])


def test_a_single_jobs_arguments_and_env_reach_the_program_unchanged(fake_k8s_run, tmp_path):
    """The same job without a policy, with one that never restarts (``XCORE_ATTEMPT`` defined in
    the container) and through the attempt wrapper: the kubelet expands, the program sees the
    values as given."""
    executors = [xk8s.Kubernetes(), xk8s.Kubernetes(retry=xp.Retry(max_attempts=1)),
                 xk8s.Kubernetes(retry=xp.Retry(max_attempts=2), **CKPT)]
    requests = [attrs.evolve(make_request(program(), executor, [",".join(ENV), *DOLLARS], ENV),
                             retry=executor.retry) for executor in executors]
    handles = hooks.KubernetesBackend().launch(requests, make_launch_context(tmp_path))
    assert [s.status for s in wait(handles)] == [xp.Status.COMPLETED] * 3
    for handle in handles:
        assert shown(fake_k8s_run, handle.name) == [DOLLARS, ENV]
    [plain] = [e for e in fake_k8s_run.get("Job", "default", handles[1].name)["spec"]["template"]["spec"][
        "containers"][0]["env"] if e["name"] == "XCORE_ATTEMPT"]
    assert plain["value"] == "1"  # so an unescaped "$(XCORE_ATTEMPT)" would have arrived as "1"


def test_a_job_group_roles_arguments_and_env_reach_the_program_unchanged(fake_k8s_run, tmp_path):
    requests = [make_request(program(), xk8s.Kubernetes(), [",".join(ENV), role, *DOLLARS], ENV, work_unit_id=1,
                             job_name=role) for role in ("server", "worker")]
    handles = hooks.KubernetesBackend().launch(requests, make_launch_context(tmp_path))
    assert {h.shape for h in handles} == {"jobset"}
    assert [s.status for s in wait(handles)] == [xp.Status.COMPLETED] * 2
    for handle in handles:
        assert shown(fake_k8s_run, f"{handle.name}-{handle.role}-0") == [[handle.role, *DOLLARS], ENV]


def test_each_replica_still_gets_its_rank_through_the_kubelets_expansion(fake_k8s_run, tmp_path):
    """``RANK`` and ``TF_CONFIG``'s index are ``$(XCORE_RANK)`` in the manifest (the same for every
    replica): only the kubelet's expansion makes them the replica's rank."""
    names = "RANK,XCORE_RANK,TF_CONFIG,E_DOLLARS"
    requests = [make_request(program(), xk8s.Kubernetes(requirements=xm.JobRequirements(replicas=2),
                                                        distributed=framework),
                             [names, "$(XCORE_RANK)"], {"E_DOLLARS": "$(XCORE_RANK) $$"}, work_unit_id=1,
                             job_name=framework) for framework in ("torch", "tf")]
    handles = hooks.KubernetesBackend().launch(requests, make_launch_context(tmp_path))
    assert [s.status for s in wait(handles)] == [xp.Status.COMPLETED] * 2
    [jobset] = fake_k8s_run.list("JobSet", "default")
    torch_env = {e["name"]: e.get("value") for e in containers(jobset)[0]["env"]}
    assert torch_env["RANK"] == "$(XCORE_RANK)"  # without the kubelet's expansion, what the program would see
    for handle in handles:
        for replica in (0, 1):
            argv, env = shown(fake_k8s_run, f"{handle.name}-{handle.role}-{replica}")
            assert env["XCORE_RANK"] == str(replica)
            if handle.role == "torch":
                assert (env["RANK"], env["TF_CONFIG"]) == (str(replica), None)
            else:
                assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": replica}
            assert argv == ["$(XCORE_RANK)"] and env["E_DOLLARS"] == "$(XCORE_RANK) $$"  # the job's own: literal
