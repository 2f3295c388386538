"""The live tier: runs only when XK8S_LIVE_KUBECONFIG names a real cluster's kubeconfig.

    XK8S_LIVE_KUBECONFIG=~/.kube/config XK8S_LIVE_NAMESPACE=xcore-test pytest plugins/xk8s/tests/test_k8s_live.py

It launches a 3-trial sweep of ``python:3.12-slim`` pods (XK8S_LIVE_IMAGE
overrides the image; it must have python3), waits, reads logs and cleans up.
"""

from __future__ import annotations

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


@pytest.mark.live_tier("kubernetes")
def test_live_sweep(tmp_path, monkeypatch, live_cluster):
    monkeypatch.setenv("KUBECONFIG", live_cluster)
    client.api_client.cache_clear()
    image = os.environ.get("XK8S_LIVE_IMAGE", "python:3.12-slim")
    program = "import sys; print(sys.argv[1:]); sys.exit(int(sys.argv[1]))"
    exe = xk8s.KubernetesExecutable(name="echo", image=image, command=["python3", "-c", program])
    executor = xk8s.Kubernetes(namespace=os.environ.get("XK8S_LIVE_NAMESPACE", "default"), ttl_after_finished_secs=600)
    handles = hooks.xcore_launch("xk8s.Kubernetes", [make_request(exe, executor, [code, "it's $HOME"])
                                                     for code in ("0", "3", "0")], make_launch_context(tmp_path))
    try:
        deadline = time.monotonic() + 600
        while not all(s.status.is_terminal for s in hooks.xcore_job_states("k", handles)):
            assert time.monotonic() < deadline, hooks.xcore_job_states("k", handles)
            time.sleep(5)
        result = hooks.xcore_job_states("k", handles)
        assert [(s.status, s.exit_code) for s in result] == [(xp.Status.COMPLETED, 0), (xp.Status.FAILED, 3),
                                                             (xp.Status.COMPLETED, 0)]
        assert "it's $HOME" in "".join(hooks.xcore_job_logs("k", handles[1], False))
    finally:
        hooks.xcore_cancel("k", handles)
