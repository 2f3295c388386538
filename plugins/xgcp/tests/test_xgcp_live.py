"""The live tier: against the real Vertex AI, only when a project is given.

    XGCP_LIVE_PROJECT=my-project [XGCP_LIVE_LOCATION=us-central1] pytest plugins/xgcp/tests/test_xgcp_live.py

Uses Application Default Credentials. It creates nothing (no cost): it checks the target and
asks for the state of a job that does not exist, through the same client and filter as
``xcore show``. Skipped (with this reason) without XGCP_LIVE_PROJECT: cloud credentials are
opt-in, never a CI service.
"""

from __future__ import annotations

import os

import pytest
from xgcp_testkit import xcore_cli

PROJECT = os.environ.get("XGCP_LIVE_PROJECT")
LOCATION = os.environ.get("XGCP_LIVE_LOCATION", "us-central1")
pytestmark = pytest.mark.skipif(not PROJECT, reason="live Vertex tier: set XGCP_LIVE_PROJECT (and ADC) to run it")


@pytest.fixture
def live_env(monkeypatch, tmp_path):
    for name in ("XGCP_API_ENDPOINT", "XGCP_LOGGING_ENDPOINT", "XGCP_TARGET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT or "")
    monkeypatch.setenv("XGCP_LOCATION", LOCATION)


def test_live_check(live_env):
    result = xcore_cli("vertex", "check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_live_status_of_an_unknown_job_is_lost(live_env):
    from xgcp import hooks
    from xgcp.executors import VertexHandle

    name = f"projects/{PROJECT}/locations/{LOCATION}/customJobs/1"
    [state] = hooks.xcore_job_states("xgcp.VertexHandle", [VertexHandle(PROJECT, LOCATION, name, 0, "r", "s", "1")])
    assert state.message.startswith("lost: "), state
