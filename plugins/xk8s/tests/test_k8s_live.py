"""The live tier: runs only when XK8S_LIVE_KUBECONFIG names a real cluster's kubeconfig.

    XK8S_LIVE_KUBECONFIG=~/.kube/config XK8S_LIVE_NAMESPACE=xcore-test pytest plugins/xk8s/tests/test_k8s_live.py

It launches small sweeps of ``python:3.12-slim`` pods (XK8S_LIVE_IMAGE overrides the image;
it must have python3): exit codes and hostile-ish arguments, a per-trial time limit and the
cancel of one trial, and `$(NAME)`/`$$` words of a single job; it waits, reads logs and cleans up
(a few minutes).
"""

from __future__ import annotations

import json
import os
import time

import pytest

import xk8s
from xcore import plugin as xp
from xcore.testing import make_launch_context, make_request, require_live_tier
from xk8s import client, hooks

LIVE = os.environ.get("XK8S_LIVE_KUBECONFIG")


@pytest.fixture
def live_cluster() -> str:
    """No Kubernetes cluster can run on the CI machine (see INFRA.md), so this tier skips there,
    also under XCORE_REQUIRE_INFRA; XCORE_REQUIRE_K8S=1 (set where a cluster is given) makes a
    missing XK8S_LIVE_KUBECONFIG a failure."""
    require_live_tier("kubernetes", bool(LIVE) and os.path.exists(os.path.expanduser(LIVE or "")),
                      "XCORE_REQUIRE_K8S", "no real API server can run on this machine; set XK8S_LIVE_KUBECONFIG "
                      "to a real cluster's kubeconfig")
    return os.path.expanduser(LIVE or "")


def _launch(tmp_path, program: str, args: list[list[str]], env: dict[str, str] | None = None,
            **executor: object) -> list:
    image = os.environ.get("XK8S_LIVE_IMAGE", "python:3.12-slim")
    exe = xk8s.KubernetesExecutable(name="echo", image=image, command=["python3", "-c", program])
    ex = xk8s.Kubernetes(namespace=os.environ.get("XK8S_LIVE_NAMESPACE", "default"), ttl_after_finished_secs=600,
                         **executor)
    requests = [make_request(exe, ex, a, env) for a in args]
    return hooks.KubernetesBackend().launch(requests, make_launch_context(tmp_path))


def _wait(handles: list, until=lambda s: s.status.is_terminal, timeout: float = 600) -> list:
    deadline = time.monotonic() + timeout
    while True:
        result = hooks.KubernetesBackend().states(handles)
        if all(until(s) for s in result):
            return result
        assert time.monotonic() < deadline, result
        time.sleep(5)


@pytest.mark.live_tier("kubernetes")
def test_live_sweep(tmp_path, monkeypatch, live_cluster):
    monkeypatch.setenv("KUBECONFIG", live_cluster)
    client.api_client.cache_clear()
    program = "import sys; print(sys.argv[1:]); sys.exit(int(sys.argv[1]))"
    handles = _launch(tmp_path, program, [[code, "it's $HOME"] for code in ("0", "3", "0")])
    try:
        result = _wait(handles)
        assert [(s.status, s.exit_code) for s in result] == [(xp.Status.COMPLETED, 0), (xp.Status.FAILED, 3),
                                                             (xp.Status.COMPLETED, 0)]
        assert "it's $HOME" in "".join(hooks.KubernetesBackend().logs(handles[1], False))
    finally:
        hooks.KubernetesBackend().cancel(handles)


@pytest.mark.live_tier("kubernetes")
def test_live_per_trial_time_limit_and_cancel_of_one_trial(tmp_path, monkeypatch, live_cluster):
    """On a real kubelet: the pod's activeDeadlineSeconds fails that trial only (and is not
    retried as a disruption), and a cancelled trial stops while the others finish."""
    monkeypatch.setenv("KUBECONFIG", live_cluster)
    client.api_client.cache_clear()
    program = "import sys, time; time.sleep(float(sys.argv[1]))"
    limit = int(os.environ.get("XK8S_LIVE_TIME_LIMIT", "90"))  # counted from the pod's start, image pull included
    handles = _launch(tmp_path, program, [["600"], ["1"], ["600"], ["5"]], time_limit_secs=limit, max_parallel=4)
    try:
        _wait(handles[2:3], until=lambda s: s.status is xp.Status.RUNNING)
        hooks.KubernetesBackend().cancel(handles[2:3])
        result = _wait(handles)
        assert result[0].status is xp.Status.FAILED and result[0].message.startswith("DeadlineExceeded"), result[0]
        assert [s.status for s in result[1:]] == [xp.Status.COMPLETED, xp.Status.CANCELLED, xp.Status.COMPLETED]
    finally:
        hooks.KubernetesBackend().cancel(handles)


@pytest.mark.live_tier("kubernetes")
def test_live_single_job_gets_dollar_words_as_written(tmp_path, monkeypatch, live_cluster):
    """On a real kubelet, which expands ``$(NAME)`` and ``$$`` in a container's args and env."""
    monkeypatch.setenv("KUBECONFIG", live_cluster)
    client.api_client.cache_clear()
    words = ["$(V)", "$(XK8S_FIRST_ATTEMPT)", "$(HOME)", "$$", "$$$", "$(", "a$$b", "end$"]
    env = {"V": "defined", "W": "$(V) $$ end$"}
    program = "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ['W']]))"
    handles = _launch(tmp_path, program, [words], env)
    try:
        assert _wait(handles)[0].status is xp.Status.COMPLETED
        shown = "".join(hooks.KubernetesBackend().logs(handles[0], False)).strip().splitlines()[-1]
        assert json.loads(shown) == [words, env["W"]]
    finally:
        hooks.KubernetesBackend().cancel(handles)
