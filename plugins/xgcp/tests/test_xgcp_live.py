"""The live tier: against the real Vertex AI, with real credentials and a project.

    XGCP_LIVE_PROJECT=my-project [XGCP_LIVE_LOCATION=us-central1] pytest plugins/xgcp/tests/test_xgcp_live.py
    # also create (and pay for) a 2-trial CPU sweep of a public image, and read its logs:
    XGCP_LIVE_CREATE=1 [XGCP_LIVE_IMAGE=python:3.11-slim] ...

Uses Application Default Credentials (`gcloud auth application-default login`). Without
XGCP_LIVE_PROJECT the tier skips with that reason, also in CI (cloud credentials are never a CI
service); ``XCORE_REQUIRE_VERTEX=1`` turns the skip into a failure where credentials exist.
"""

from __future__ import annotations

import json
import os

import pytest
from xgcp_testkit import logs, wait, xcore_cli

import xcore as xm
from xcore.testing import require_live_tier

PROJECT = os.environ.get("XGCP_LIVE_PROJECT")
LOCATION = os.environ.get("XGCP_LIVE_LOCATION", "us-central1")
pytestmark = pytest.mark.live_tier("vertex")


@pytest.fixture
def live_env(monkeypatch, tmp_path):
    require_live_tier("vertex", bool(PROJECT), "XCORE_REQUIRE_VERTEX",
                      "needs Google Cloud credentials and XGCP_LIVE_PROJECT")
    for name in ("XGCP_API_ENDPOINT", "XGCP_LOGGING_ENDPOINT", "XGCP_QUOTAS_ENDPOINT", "XGCP_TARGET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT or "")
    monkeypatch.setenv("XGCP_LOCATION", LOCATION)


def test_live_check(live_env):
    result = xcore_cli("vertex", "check", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    checks = {c["check"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["custom-training quota"]["ok"], checks


def test_live_status_of_an_unknown_job_is_lost(live_env):
    from xgcp import hooks
    from xgcp.executors import VertexHandle

    name = f"projects/{PROJECT}/locations/{LOCATION}/customJobs/1"
    [state] = hooks.VertexBackend().states([VertexHandle(PROJECT, LOCATION, name, 0, "r", "s", "1")])
    assert state.message.startswith("lost: "), state


def test_live_sweep_runs_and_logs(live_env, monkeypatch, tmp_path):
    if os.environ.get("XGCP_LIVE_CREATE") != "1":
        pytest.skip("creating jobs costs money: set XGCP_LIVE_CREATE=1 to run this one")
    import xgcp

    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    image = os.environ.get("XGCP_LIVE_IMAGE", "python:3.11-slim")
    with xm.create_experiment("xgcp live sweep") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), image)])
        for trial in range(2):
            experiment.add(xm.Job(exe, xgcp.Vertex(requirements=xm.JobRequirements(cpu=4), timeout_secs=1200),
                                  args=["python", "-c", f"print('xcore live trial {trial}')"]))
    found = wait(experiment.experiment_id, timeout=1800)
    assert [j.status for j in found] == [xm.Status.COMPLETED] * 2, [j.message for j in found]
    assert "xcore live trial 0" in "".join(logs(found[0]))
