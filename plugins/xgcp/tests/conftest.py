"""Fixtures: a fake Vertex API on 127.0.0.1 that xgcp's real aiplatform_v1 client talks to."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_vertex import FakeVertex


@pytest.fixture
def vertex(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeVertex]:
    """A running fake; xgcp (here and in child processes) talks to it with anonymous credentials."""
    from xgcp import api

    fake = FakeVertex().start()
    monkeypatch.setenv("XGCP_API_ENDPOINT", fake.endpoint)
    monkeypatch.setenv("XGCP_LOGGING_ENDPOINT", fake.endpoint)
    monkeypatch.setenv("XGCP_QUOTAS_ENDPOINT", fake.endpoint)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "fake-project")
    monkeypatch.delenv("XGCP_TARGET", raising=False)
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setattr(api, "BACKOFF_BASE_SECS", 0.01)
    yield fake
    fake.stop()


@pytest.fixture
def xcore_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    from xcore.testing import plugin_host

    home = tmp_path / "home"
    monkeypatch.setenv("XCORE_HOME", str(home))
    monkeypatch.setenv("XCORE_QUIET", "1")
    monkeypatch.delenv("XCORE_STORE", raising=False)
    plugin_host({}, entry_points=True)
    yield home
    plugin_host({}, entry_points=True)  # a fresh host: nothing cached from this test
