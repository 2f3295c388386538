"""Vertex images: xm.python_container / xm.dockerfile_container built with the core's image
builder on the real dockerd and pushed to the real registry on 127.0.0.1:5000 (the target's
registry), tagged by content; the CustomJob the fake Vertex receives names the pushed image."""

from __future__ import annotations

import secrets
import subprocess

import pytest
from xgcp_testkit import jobs

import xcore as xm
import xgcp
from xcore import images
from xcore.testing.images import LOCAL_REGISTRY, removing_built_images, require_docker_and_registry

REGISTRY = LOCAL_REGISTRY


@pytest.fixture(autouse=True)
def remove_built_images():
    with removing_built_images():
        yield


@pytest.fixture
def project(tmp_path, monkeypatch):
    require_docker_and_registry()
    root = tmp_path / "trainer"
    (root / "train").mkdir(parents=True)
    (root / "train" / "__init__.py").write_text("")
    (root / "train" / "__main__.py").write_text(f"import sys; print('train', sys.argv[1:], {secrets.token_hex(8)!r})\n")
    config = tmp_path / "config"
    config.mkdir()
    (config / "vertex.toml").write_text(
        f'default = "dev"\n[targets.dev]\nproject = "fake-project"\nregistry = "{REGISTRY}/xgcp-test"\n')
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(config))
    return root


def launch(root, spec=None, title="images") -> int:
    with xm.create_experiment(title) as experiment:
        [exe] = experiment.package([xm.python_container(spec or xgcp.Vertex.Spec(), xm.ModuleName("train"),
                                                        path=str(root), base_image="xcore-python:3.11")])
        experiment.add(xm.Job(exe, xgcp.Vertex(), args=["--lr", "it's $x"]))
    return experiment.experiment_id


def image_of(vertex, experiment_id) -> str:
    [job] = vertex.by_label("xcore_experiment", str(experiment_id))
    [pool] = job.job_spec.worker_pool_specs
    assert list(pool.container_spec.args) == ["--lr", "it's $x"] and not pool.container_spec.command
    return pool.container_spec.image_uri


def test_build_push_then_relaunch_neither_builds_nor_pushes(vertex, xcore_home, project):
    builds, pushes = len(images.BUILDS), len(images.PUSHES)
    first = image_of(vertex, launch(project))
    assert first.startswith(f"{REGISTRY}/xgcp-test/trainer:")
    assert images.BUILDS[builds:] == [first] and images.PUSHES[pushes:] == [first]
    out = subprocess.run(["docker", "run", "--rm", first, "a b"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("train ['a b']")  # the image's ENTRYPOINT runs the module
    assert image_of(vertex, launch(project)) == first
    assert len(images.BUILDS) == builds + 1 and len(images.PUSHES) == pushes + 1  # relaunch: 0 builds, 0 pushes
    (project / "train" / "extra.py").write_text("x = 1\n")
    changed = image_of(vertex, launch(project))
    assert changed != first and changed.startswith(f"{REGISTRY}/xgcp-test/trainer:")
    assert images.BUILDS[-1] == changed == images.PUSHES[-1]


def test_push_image_tag_is_honoured_as_in_xmanager(vertex, xcore_home, project):
    tag = f"{REGISTRY}/xgcp-test/pushed:{project.parent.name[-20:].lower()}"
    first = image_of(vertex, launch(project, xgcp.Vertex.Spec(push_image_tag=tag)))
    assert first == tag
    pushes = len(images.PUSHES)
    assert image_of(vertex, launch(project, xgcp.Vertex.Spec(push_image_tag=tag))) == tag
    assert len(images.PUSHES) == pushes  # unchanged: the tag already names the content's manifest
    (project / "train" / "extra.py").write_text("x = 2\n")
    assert image_of(vertex, launch(project, xgcp.Vertex.Spec(push_image_tag=tag))) == tag
    assert tag in images.PUSHES[pushes:]  # moved to the new content


def test_dockerfile_container_is_built_and_pushed(vertex, xcore_home, project):
    (project / "Dockerfile").write_text('FROM xcore-python:3.11\nCOPY train /app/train\nWORKDIR /app\n'
                                        'ENTRYPOINT ["python3", "-m", "train"]\n')
    with xm.create_experiment("dockerfile") as experiment:
        [exe] = experiment.package([xm.dockerfile_container(xgcp.Vertex.Spec(), str(project))])
        experiment.add(xm.Job(exe, xgcp.Vertex(), args=["--lr", "it's $x"]))
    assert image_of(vertex, experiment.experiment_id).startswith(f"{REGISTRY}/xgcp-test/")


def test_registry_down_is_a_clear_error_and_nothing_is_launched(vertex, xcore_home, project, tmp_path):
    (tmp_path / "config" / "vertex.toml").write_text(
        'default = "dev"\n[targets.dev]\nproject = "fake-project"\nregistry = "127.0.0.1:5999/xgcp-test"\n')
    with pytest.raises(images.RegistryUnreachableError) as error:
        launch(project, title="down")
    assert "Cannot reach the image registry 127.0.0.1:5999" in str(error.value)
    assert "registry in the target" in str(error.value)
    assert vertex.jobs == {}
    for record in xm.list_experiments(title="down"):
        assert jobs(record.id) == []


def test_no_registry_says_where_to_set_one(vertex, xcore_home, project, tmp_path, monkeypatch):
    (tmp_path / "config" / "vertex.toml").write_text('default = "dev"\n[targets.dev]\nproject = "fake-project"\n')
    monkeypatch.delenv("XGCP_REGISTRY", raising=False)
    with pytest.raises(xm.PackagingError, match="needs a registry to push to: set registry ="):
        launch(project)
    assert vertex.jobs == {}
