"""Executor validation, serialization, lazy imports, targets."""

from __future__ import annotations

import subprocess
import sys

import pytest

import xcore as xm
import xk8s
from xcore import plugin as xp
from xk8s import targets


@pytest.mark.parametrize("kwargs, message", [
    ({"namespace": "Bad_NS"}, "DNS label"),
    ({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}, "operator='Exists'"),
    ({"tolerations": [{"key": "a", "effect": "NoSchedul"}]}, "effect"),
    ({"env_from_secrets": {"TOKEN": "just-a-name"}}, "'SECRET/KEY'"),
    ({"env_from_secrets": {"BAD NAME": "s/k"}}, "environment variable"),
    ({"volumes": [{"name": "d", "mount_path": "/d"}]}, "exactly one source"),
    ({"volumes": [{"name": "d", "mount_path": "rel", "pvc": "c"}]}, "absolute path"),
    ({"retries": -1}, ">= 0"),
    ({"max_parallel": 0}, ">= 1"),
    ({"time_limit_secs": 1.5}, ">= 1"),
    ({"node_selector": {"pool": "has space"}}, "label value"),
    ({"image_pull_policy": "always"}, "'Always'"),
])
def test_bad_fields_fail_when_written_with_the_fix(kwargs, message):
    with pytest.raises(xp.ConfigurationError, match=message):
        xk8s.Kubernetes(**kwargs)


def test_executor_and_handle_round_trip_through_the_store_serializer(monkeypatch):
    from xcore.testing import plugin_host

    host = plugin_host({}, entry_points=True)
    executor = xk8s.Kubernetes(requirements=xm.JobRequirements(cpu=2, h100=8), namespace="ml",
                               tolerations=[{"key": "gpu", "effect": "NoSchedule"}],
                               volumes=[{"name": "d", "mount_path": "/d", "pvc": "claim"}],
                               env_from_secrets={"K": "s/k"}, queue="q")
    handle = xk8s.KubernetesHandle("ctx", "ml", "xc-e1-u1-abc", 7, "abc", log_path="k8s://x")
    for value in (executor, handle):
        assert host.serializer.load(host.serializer.dump(value)) == value


def test_import_xk8s_does_not_import_the_kubernetes_client():
    # Modules already there at interpreter start (e.g. the `google` namespace packages that
    # google-cloud-* install as .pth files when xgcp shares the environment) are not xk8s's doing.
    code = ("import sys; before = set(sys.modules)\n"
            "import xk8s, xk8s.hooks, xk8s.manifests, xk8s.states\n"
            "xk8s.Kubernetes(); print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
            "('kubernetes', 'urllib3', 'yaml', 'google')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_targets_give_context_namespace_queue_and_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("XK8S_TARGET", raising=False)
    (tmp_path / "k8s.toml").write_text(
        'default = "gke"\n[targets.gke]\ncontext = "gke_ctx"\nnamespace = "research"\nqueue = "lab"\n'
        '[targets.gke.defaults]\nservice_account = "trainer"\nimage_pull_secrets = ["regcred"]\n')
    executor, context, namespace = targets.resolve(xk8s.Kubernetes(service_account="mine"))
    assert (context, namespace, executor.queue) == ("gke_ctx", "research", "lab")
    assert executor.service_account == "mine" and executor.image_pull_secrets == ["regcred"]
    with pytest.raises(xp.ConfigurationError, match="no target 'nope'.*known: gke"):
        targets.resolve(xk8s.Kubernetes(target="nope"))
    (tmp_path / "k8s.toml").write_text('[targets.x]\nnamespac = "a"\n')
    with pytest.raises(xp.ConfigurationError, match="unknown keys"):
        targets.get("x")


def test_xcore_help_stays_fast_and_lists_k8s():
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "xcore.cli.main", "--help"],
                         capture_output=True, text=True, check=False)
    assert "k8s" in out.stdout
    assert "kubernetes" not in out.stderr


def core_imports(directory):
    import ast
    from pathlib import Path

    found = set()
    for path in Path(directory).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "xcore"}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "xcore":
                found |= {node.module} if node.module != "xcore" else {f"xcore.{a.name}" for a in node.names}
    return found


def test_xk8s_is_written_only_against_the_public_plugin_api():
    from pathlib import Path

    here = Path(__file__).parent
    assert core_imports(here.parent / "xk8s") <= {"xcore.plugin", "xcore.images"}  # images: the shared builder
    assert {m for m in core_imports(here) | core_imports(here.parent / "bench")
            if not m.startswith("xcore.testing")} <= {"xcore", "xcore.plugin", "xcore.images", "xcore.contrib"}


def test_kubernetes_takes_xm_locals_requirements_by_position():
    """XManager's ``xm_local.Kubernetes(requirements)`` takes it by position (docs/porting.md)."""
    assert xk8s.Kubernetes(xm.JobRequirements(cpu=2)).requirements == xm.JobRequirements(cpu=2)
    assert xk8s.Kubernetes({"cpu": 1}).requirements == xm.JobRequirements(cpu=1)
    with pytest.raises(TypeError):
        xk8s.Kubernetes(xm.JobRequirements(), "target")  # the rest are keyword-only
