"""Fixtures: a fake API server (tests/fake_apiserver.py) behind a real kubeconfig."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_apiserver import FakeCluster


def _cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_pods: bool) -> Iterator[FakeCluster]:
    from xk8s import client

    cluster = FakeCluster(run_pods=run_pods)
    cluster.serve()
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("XK8S_TARGET", raising=False)
    client.api_client.cache_clear()
    client.CALLS.clear()
    yield cluster
    client.api_client.cache_clear()
    cluster.close()
    assert not cluster.errors, f"the fake's controllers failed: {cluster.errors!r}"


@pytest.fixture
def fake_k8s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    """Pods move only when the test moves them."""
    yield from _cluster(tmp_path, monkeypatch, run_pods=False)


@pytest.fixture
def fake_k8s_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    """Pods run their container's command as local processes."""
    yield from _cluster(tmp_path, monkeypatch, run_pods=True)
