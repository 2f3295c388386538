"""Image build and push against the real dockerd and the real registry on 127.0.0.1:5000, with
the core's image builder (``xcore.images``): tagged by content, so an unchanged project is
neither rebuilt nor pushed again."""

from __future__ import annotations

import json
import secrets
import subprocess
import urllib.request

import pytest

import xcore as xm
import xk8s
from xcore import images
from xcore.testing import make_packaging_context
from xcore.testing.images import LOCAL_REGISTRY, removing_built_images, require_docker_and_registry

REGISTRY = LOCAL_REGISTRY


@pytest.fixture(autouse=True)
def remove_built_images():
    with removing_built_images():
        yield


@pytest.fixture
def project(tmp_path):
    require_docker_and_registry()
    root = tmp_path / "proj"
    (root / "hello").mkdir(parents=True)
    (root / "hello" / "__init__.py").write_text("")
    (root / "hello" / "__main__.py").write_text(f"import sys; print('hello', sys.argv[1:], {secrets.token_hex(8)!r})\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "junk.pyc").write_bytes(b"ignored")
    return root


def package(root, registry=f"{REGISTRY}/xcore-test", **spec):
    packageable = xm.python_container(xk8s.KubernetesSpec(registry=registry, **spec), xm.ModuleName("hello"),
                                      path=str(root), base_image="xcore-python:3.11")
    from xk8s import hooks

    return hooks.KubernetesBackend().package(packageable, make_packaging_context(root.parent / "cache"))


def test_build_push_and_relaunch_without_rebuild_or_push(project):
    b, p = len(images.BUILDS), len(images.PUSHES)
    exe = package(project)
    assert exe.image.startswith(f"{REGISTRY}/xcore-test/proj:") and exe.command == ["python3", "-m", "hello"]
    assert images.BUILDS[b:] == [exe.image] and images.PUSHES[p:] == [exe.image]
    catalog = json.load(urllib.request.urlopen(f"http://{REGISTRY}/v2/_catalog"))
    assert "xcore-test/proj" in catalog["repositories"]
    out = subprocess.run(["docker", "run", "--rm", exe.image, "it's $x"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("hello [") and "it's $x" in out.stdout
    subprocess.run(["docker", "image", "rm", exe.image], capture_output=True, check=False)
    again = package(project)  # unchanged: the registry has the tag, even with the local image gone
    assert again.image == exe.image and images.BUILDS[b:] == [exe.image] and images.PUSHES[p:] == [exe.image]
    (project / "hello" / "extra.py").write_text("x = 1\n")
    changed = package(project)
    assert changed.image != exe.image and images.BUILDS[-1] == changed.image == images.PUSHES[-1]
    assert len(images.BUILDS) - b == len(images.PUSHES) - p == 2


def test_ignored_files_do_not_change_the_tag(project):
    spec = xm.PythonContainer(entrypoint=xm.ModuleName("hello"), path=str(project), base_image="xcore-python:3.11")
    context = images.python_container_context(spec)
    digest = images.content_hash(context, {"xcore-python:3.11": "sha256:x"})
    (project / "__pycache__" / "other.pyc").write_bytes(b"more junk")
    context = images.python_container_context(spec)
    assert images.content_hash(context, {"xcore-python:3.11": "sha256:x"}) == digest


def test_push_image_tag_is_what_the_pods_run(project):
    tag = f"{REGISTRY}/xcore-test/k8s-pushed:{project.parent.name[-20:].lower()}"
    exe = package(project, push_image_tag=tag)
    assert exe.image == tag
    pushes = len(images.PUSHES)
    assert package(project, push_image_tag=tag).image == tag and len(images.PUSHES) == pushes


def test_registry_down_is_a_clear_error(project):
    with pytest.raises(images.RegistryUnreachableError, match="Cannot reach the image registry 127.0.0.1:5999"):
        package(project, registry="127.0.0.1:5999/xcore-test")


def test_no_registry_is_a_packaging_error_with_the_fix(tmp_path, monkeypatch):
    from xcore import plugin as xp
    from xk8s import hooks

    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("XK8S_REGISTRY", raising=False)
    packageable = xm.python_container(xk8s.KubernetesSpec(), xm.ModuleName("hello"), path=str(tmp_path))
    with pytest.raises(xp.PackagingError, match="needs a registry"):
        hooks.KubernetesBackend().package(packageable, make_packaging_context(tmp_path / "cache"))


def test_registry_down_launches_and_records_nothing(project, fake_k8s, tmp_path, monkeypatch):
    from xcore.testing import plugin_host

    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_QUIET", "1")
    monkeypatch.delenv("XCORE_STORE", raising=False)
    plugin_host({}, entry_points=True)
    try:
        with pytest.raises(images.RegistryUnreachableError, match="fix the registry in the target"), \
                xm.create_experiment("registry-down") as experiment:
            [exe] = experiment.package([xm.python_container(
                xk8s.KubernetesSpec(registry="127.0.0.1:5999/xcore-test"), xm.ModuleName("hello"), path=str(project),
                base_image="xcore-python:3.11")])
            experiment.add(xm.Job(exe, xk8s.Kubernetes(), args=["x"]))
        assert fake_k8s.list("Job", "default") == [] and fake_k8s.calls("POST") == 0
        assert experiment.work_unit_count == 0
        assert xm.get_experiment(experiment.experiment_id).work_units == {}
    finally:
        plugin_host({}, entry_points=True)
