"""``XCORE_ATTEMPT`` for a single job or JobGroup with a retry policy, and the checkpoint volume
such a policy needs (issue #23): the wrapper ``/bin/sh -c ATTEMPT_SCRIPT xk8s-attempt ARGV...``
run for real (here, and by the fake API server's kubelet), and jobs without a policy unchanged."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import attrs
import kubernetes_validate
import pytest

import xk8s
from xcore import plugin as xp
from xcore.testing import make_launch_context, make_request
from xcore.testing.expansion import expand
from xk8s import hooks
from xk8s import manifests as mf

CKPT = {"volumes": [xk8s.Volume(name="ckpt", mount_path="/ckpt", pvc="checkpoints")], "checkpoint_volume": "ckpt"}
POLICY = xp.Retry(max_attempts=3, on=("preemption",), exit_codes=(75,))
#: Words a shell line would mangle; through the wrapper they must arrive as they are.
TRICKY = ["two words", "it's", '"quoted"', "$HOME", "$(id)", "`id`", "${X:-y}", "$((1+1))", "a\nb", "tab\there",
          "*", "~", "-e", "", "ünïcødé ✓", "back\\slash", ";", "&&", "|", ">out", "$@", "$1", "%s"]
SHOW = "import json, os, sys; print(json.dumps([os.environ.get('XCORE_ATTEMPT'), sys.argv[1:]]))"


def exe(command=("python3", "-m", "train")):
    return xk8s.KubernetesExecutable(name="train", image="registry.example/lab/train:1", command=list(command))


def single(executor, args=("--lr=0.1",), attempt=1, command=("python3", "-m", "train")):
    """The container of a single job's manifest (validated as the API server would); ``command``
    empty: the image's own entrypoint."""
    argv = [*command, *args]
    job, _ = mf.indexed_job("x", "ml", executor, "img", {}, trials=[(argv, {"A": "1"})], inline=True,
                            has_command=bool(command), retry=executor.retry, attempts=[attempt])
    kubernetes_validate.validate(job, "1.33", strict=True)
    return job["spec"]["template"]["spec"]["containers"][0]


def pod_env(container, annotations=None, labels=None):
    """The container's environment as the kubelet gives it (the downward API reads the pod's
    annotations and labels; one that is missing reads empty)."""
    meta = {"annotations": annotations or {}, "labels": labels or {}}
    env = {"PATH": "/usr/bin:/bin"}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            where, _, key = item["valueFrom"]["fieldRef"]["fieldPath"].removesuffix("']").partition("['")
            env[item["name"]] = meta[where.removeprefix("metadata.")].get(key, "")
    return env


def shells():
    """/bin/sh (what pods run) and the other POSIX shells this machine has."""
    found = [["/bin/sh"]]
    found += [[path] for name in ("dash", "bash", "mksh", "ksh", "zsh") if (path := shutil.which(name))]
    if shutil.which("busybox"):
        found.append([shutil.which("busybox"), "sh"])
    return found


def run(container, env, shell=("/bin/sh",)):
    """The container's command as the kubelet runs it (expanded), with ``shell`` as its /bin/sh."""
    argv = [expand(word, env) for word in [*container["command"], *(container.get("args") or [])]]
    assert argv[:2] == ["/bin/sh", "-c"]
    done = subprocess.run([*shell, *argv[1:]], env=env, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr.decode()


def test_a_single_job_with_a_policy_runs_under_the_attempt_wrapper():
    argv = [sys.executable, "-c", SHOW, *TRICKY]
    container = single(xk8s.Kubernetes(retry=POLICY, **CKPT), argv[1:], command=argv[:1])
    assert "args" not in container
    env = pod_env(container)
    assert env["XK8S_FIRST_ATTEMPT"] == "1" and "XCORE_ATTEMPT" not in env  # the wrapper computes it
    # Kubernetes expands $(NAME) and $$ in a command: the wrapper's words, as xk8s writes them
    # ($ doubled), come out as the script, whatever the container's variables are
    names = {item["name"]: "EXPANDED" for item in container["env"]}
    wrapper = ["/bin/sh", "-c", mf.ATTEMPT_SCRIPT, mf.ATTEMPT_WRAPPER_NAME, *argv]
    assert [expand(word, names) for word in container["command"]] == wrapper


@pytest.mark.parametrize(("parts", "attempt"), [
    ({}, "1"),  # a first pod: the annotations are not there yet, each part reads empty
    ({"first": "1", "failures": "0", "ignored": "0"}, "1"),
    ({"first": "2", "failures": "1", "ignored": "3"}, "6"),
    ({"first": "1", "failures": "0", "ignored": "0", "restarts": "4"}, "5"),
    ({"first": "10", "failures": "10", "ignored": "", "restarts": "9"}, "29"),
])
def test_the_wrapper_adds_the_parts_and_passes_every_argument_unchanged(parts, attempt):
    argv = [sys.executable, "-c", SHOW, *TRICKY]
    container = single(xk8s.Kubernetes(retry=POLICY, **CKPT), argv[1:], attempt=int(parts.get("first") or 1),
                       command=argv[:1])
    annotations = {key: parts[name] for name, key in (("failures", mf.FAILURES_ANNOTATION),
                                                       ("ignored", mf.IGNORED_ANNOTATION)) if name in parts}
    labels = {"jobset.sigs.k8s.io/restart-attempt": parts["restarts"]} if "restarts" in parts else {}
    env = pod_env(container, annotations)
    if labels:  # a JobSet role's pod also reads its set's restarts
        env["XK8S_JOBSET_RESTARTS"] = labels["jobset.sigs.k8s.io/restart-attempt"]
    for shell in shells():
        assert run(container, env, shell)[0] == [attempt, TRICKY], shell


@pytest.mark.parametrize("bad", ["x", "1; touch /tmp/xk8s-pwned", "a[$(id)]", "08", "-1", "1 + 1", "0x10"])
def test_parts_that_are_not_numbers_leave_xcore_attempt_unset_and_the_program_runs(bad):
    argv = [sys.executable, "-c", SHOW, "ok"]
    container = single(xk8s.Kubernetes(retry=POLICY, **CKPT), argv[1:], command=argv[:1])
    env = pod_env(container, {mf.IGNORED_ANNOTATION: bad})
    for shell in shells():
        shown, stderr = run(container, {**env, "XCORE_ATTEMPT": "stale"}, shell)
        assert shown == [None, ["ok"]], shell
        assert "xk8s: XCORE_ATTEMPT not set" in stderr


def test_a_jobgroup_with_a_policy_adds_the_sets_restarts():
    from test_k8s_manifests import validate_jobset

    executor = xk8s.Kubernetes(retry=POLICY, **CKPT)
    argv = [sys.executable, "-c", SHOW, "$HOME", "x y"]
    roles = [("a", executor, "img", argv, {}), ("b", attrs.evolve(executor, attempt_env=False), "img", ["b"], {})]
    jobset = mf.jobset("x", "ml", roles, {}, has_command=[True, True], retry=POLICY, attempt=2)
    validate_jobset(jobset)
    a, b = ([rj["template"]["spec"]["template"]["spec"]["containers"][0]
             for rj in jobset["spec"]["replicatedJobs"]])
    assert a["command"][:4] == ["/bin/sh", "-c", mf.literal(mf.ATTEMPT_SCRIPT), mf.ATTEMPT_WRAPPER_NAME]
    assert b["command"] == ["b"]  # attempt_env=False: an image without a shell; the parts only
    assert {"XK8S_FIRST_ATTEMPT", "XK8S_INDEX_FAILURES", "XK8S_JOBSET_RESTARTS"} <= {e["name"] for e in b["env"]}
    env = pod_env(a, {mf.IGNORED_ANNOTATION: "1"}, {"jobset.sigs.k8s.io/restart-attempt": "2"})
    assert env["XK8S_JOBSET_RESTARTS"] == "2"
    assert run(a, env)[0] == ["5", ["$HOME", "x y"]]  # 2 + 0 failures + 1 ignored + 2 restarts


def test_jobs_without_a_policy_are_unchanged():
    """No ``retry=``: the program is the container's command, with the parts and no XCORE_ATTEMPT,
    as before (an image without a shell keeps working)."""
    parts = [{"name": "XK8S_FIRST_ATTEMPT", "value": "1"},
             {"name": "XK8S_INDEX_FAILURES",
              "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{mf.FAILURES_ANNOTATION}']"}}},
             {"name": "XK8S_INDEX_IGNORED_FAILURES",
              "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{mf.IGNORED_ANNOTATION}']"}}}]
    for executor in (xk8s.Kubernetes(), xk8s.Kubernetes(retries=2), xk8s.Kubernetes(**CKPT)):
        container = single(executor, ["--lr=0.1"])
        assert (container["command"], "args" in container) == (["python3", "-m", "train", "--lr=0.1"], False)
        assert container["env"] == [*parts, {"name": "A", "value": "1"}]
    image_entrypoint = single(xk8s.Kubernetes(), ["--lr=0.1"], command=())
    assert ("command" in image_entrypoint, image_entrypoint["args"]) == (False, ["--lr=0.1"])
    roles = [("a", xk8s.Kubernetes(), "img", ["a", "b"], {})]
    role = mf.jobset("x", "ml", roles, {}, has_command=[True])["spec"]["replicatedJobs"][0]
    container = role["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["a", "b"] and "XCORE_ATTEMPT" not in {e["name"] for e in container["env"]}


def test_a_policy_with_nothing_to_add_gets_a_plain_value_and_no_shell():
    """max_attempts=1 (Kubernetes never starts the trial again): no wrapper; an image's own
    entrypoint or a shell-less image with a policy that retries: the parts only."""
    never = single(xk8s.Kubernetes(retry=xp.Retry(max_attempts=1)), ["--a"], attempt=3)
    assert never["command"] == ["python3", "-m", "train", "--a"]
    assert {"name": "XCORE_ATTEMPT", "value": "3"} in never["env"]
    for container in (single(xk8s.Kubernetes(retry=POLICY, **CKPT), ["--a"], command=()),
                      single(xk8s.Kubernetes(retry=POLICY, attempt_env=False, **CKPT), ["--a"])):
        assert [*container.get("command", []), *container.get("args", [])][-1] == "--a"
        assert mf.literal(mf.ATTEMPT_SCRIPT) not in container.get("command", [])
        assert "XCORE_ATTEMPT" not in {e["name"] for e in container["env"]}
        assert "XK8S_FIRST_ATTEMPT" in {e["name"] for e in container["env"]}


def test_a_policy_that_retries_without_a_checkpoint_volume_is_refused():
    for policy in (POLICY, xp.Retry()):  # xm.Retry() named explicitly retries too
        with pytest.raises(xp.ConfigurationError, match=r"^Kubernetes\(retry=.*checkpoint_volume='ckpt'"):
            xk8s.Kubernetes(retry=policy)
    xk8s.Kubernetes(retry=xp.Retry(max_attempts=1))  # never retries: nothing to keep
    xk8s.Kubernetes()  # the default policy: no XCORE_CHECKPOINT_DIR then
    xk8s.Kubernetes(retries=3)  # the executor's own count, as before


def test_kubernetes_replaces_the_pod_and_the_program_sees_attempt_2_with_its_argv(fake_k8s_run, tmp_path):
    program = (SHOW + "\nsys.exit(75 if os.environ.get('XCORE_ATTEMPT') == '1' else 0)")
    executable = exe([sys.executable, "-c", program])
    request = make_request(executable, xk8s.Kubernetes(retry=POLICY, **CKPT), TRICKY, {"TRIAL": "0"})
    backend = hooks.KubernetesBackend()
    [handle] = backend.launch([attrs.evolve(request, retry=POLICY)], make_launch_context(tmp_path / "state"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and backend.states([handle])[0].status is not xp.Status.COMPLETED:
        time.sleep(0.1)
    state = backend.states([handle])[0]
    assert (state.status, state.attempt) == (xp.Status.COMPLETED, 2), state
    pods = fake_k8s_run.pods(handle.name, 0)
    logs = [json.loads(fake_k8s_run.pod_log("default", p["metadata"]["name"])) for p in pods]
    assert logs == [["1", TRICKY], ["2", TRICKY]]


def test_at_add_a_jobs_own_policy_without_a_volume_is_refused_and_records_nothing(fake_k8s, tmp_path, monkeypatch):
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_QUIET", "1")
    monkeypatch.delenv("XCORE_STORE", raising=False)
    script = tmp_path / "launch.py"
    script.write_text("""
import xcore as xm
import xk8s

with xm.create_experiment("refused") as e:
    [exe] = e.package([xk8s.image("img", ["python3", "-m", "train"])])
    try:
        e.add(xm.Job(exe, xk8s.Kubernetes(), args=["--a"], retry=xm.Retry(max_attempts=2)))
    except Exception as exc:
        print("refused:", exc)
    e.add(xm.Job(exe, xk8s.Kubernetes(), args=["--b"]))
""")
    done = subprocess.run([sys.executable, "-m", "xcore.cli.main", "launch", str(script)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.startswith("refused:")]
    assert "a policy that retries needs" in line and "checkpoint_volume='ckpt'" in line
    shown = subprocess.run([sys.executable, "-m", "xcore.cli.main", "show", "1", "--json"], capture_output=True,
                           text=True, timeout=120)
    units = json.loads(shown.stdout)["work_units"]
    assert [(u["id"], u["jobs"][0]["args"]) for u in units] == [(1, ["--b"])]
    [job] = fake_k8s.list("Job", "default")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "--b"
