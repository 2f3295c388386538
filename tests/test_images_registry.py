"""The core image builder's registry half (``xcore.images.publish``) on the real dockerd and
the real registry on 127.0.0.1:5000: content tags, the skip when the registry has the tag,
push_tag, and what a user reads when the registry is down or refuses the credentials (which
never appear in the message)."""

from __future__ import annotations

import base64
import http.server
import io
import json
import secrets
import subprocess
import threading
import urllib.request

import pytest

import xcore as xm
from xcore import images
from xcore.plugin import Progress
from xcore.testing.images import LOCAL_REGISTRY, removing_built_images, require_docker_and_registry

REGISTRY = LOCAL_REGISTRY
BASE = "xcore-python:3.11"


@pytest.fixture(autouse=True)
def remove_built_images():
    with removing_built_images():
        yield


@pytest.fixture
def context(tmp_path):
    require_docker_and_registry()
    root = tmp_path / "core-proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__main__.py").write_text(f"print('unique', {secrets.token_hex(8)!r})\n")
    spec = xm.PythonContainer(entrypoint=xm.ModuleName("pkg"), path=str(root), base_image=BASE)
    return lambda: images.python_container_context(spec)


def test_publish_builds_and_pushes_once_then_asks_the_registry_only(context, tmp_path):
    client = images.connect()
    stream = io.StringIO()
    first = images.publish(client, context(), f"{REGISTRY}/xcore-core-test", progress=Progress(stream, True),
                           cache_dir=tmp_path / "cache")
    assert first.built and first.pushed and first.reference == first.content_reference
    assert first.reference == f"{REGISTRY}/xcore-core-test/core_proj:{first.content_hash[:12]}"
    assert images.BUILDS[-1] == first.reference == images.PUSHES[-1]
    shown = stream.getvalue()
    assert "checking image" in shown and "pushing " + first.reference in shown and "pushed " in shown
    tags = json.load(urllib.request.urlopen(f"http://{REGISTRY}/v2/xcore-core-test/core_proj/tags/list"))["tags"]
    assert first.content_hash[:12] in tags
    builds, pushes = len(images.BUILDS), len(images.PUSHES)
    again = images.publish(client, context(), f"{REGISTRY}/xcore-core-test", cache_dir=tmp_path / "cache")
    assert (again.reference, again.built, again.pushed) == (first.reference, False, False)
    assert (len(images.BUILDS), len(images.PUSHES)) == (builds, pushes)


def test_unchanged_relaunch_in_a_new_process_imports_no_docker_sdk(context, tmp_path):
    """Without a client, publish asks the engine's socket directly: an unchanged project costs
    two small requests and no SDK import (about half a second)."""
    import sys

    built = images.publish(None, context(), f"{REGISTRY}/xcore-core-test", cache_dir=tmp_path / "cache")
    assert built.pushed
    script = (
        "import sys, xcore as xm\nfrom xcore import images\n"
        f"spec = xm.PythonContainer(entrypoint=xm.ModuleName('pkg'), path={str(tmp_path / 'core-proj')!r}, "
        f"base_image={BASE!r})\n"
        f"again = images.publish(None, images.python_container_context(spec), {REGISTRY + '/xcore-core-test'!r})\n"
        "print(again.reference, again.built, again.pushed, 'docker' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == [built.reference, "False", "False", "False"]


def test_push_tag_moves_with_the_content(context, tmp_path):
    client = images.connect()
    tag = f"{REGISTRY}/xcore-core-test/moving:{tmp_path.name[-20:].lower()}"
    first = images.publish(client, context(), f"{REGISTRY}/xcore-core-test", push_tag=tag)
    assert first.reference == tag and images.PUSHES[-2:] == [first.content_reference, tag]
    assert images.remote_digest(client, tag) == images.remote_digest(client, first.content_reference)
    again = images.publish(client, context(), f"{REGISTRY}/xcore-core-test", push_tag=tag)
    assert not again.pushed and not again.built


def test_registry_down_names_the_registry_and_the_fix(context):
    with pytest.raises(images.RegistryUnreachableError) as error:
        images.publish(images.connect(), context(), "127.0.0.1:5999/nothing-here")
    message = str(error.value)
    assert message.startswith("Cannot reach the image registry 127.0.0.1:5999 (")
    assert "connection refused" in message and "fix the registry in the target" in message


def test_bad_registry_setting_is_a_configuration_error(context):
    with pytest.raises(xm.ConfigurationError, match="is not an image reference"):
        images.publish(images.connect(), context(), "https://Registry.example/x")


class _Refuse(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802  (http.server's naming)
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="xcore-test"')
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


def test_auth_failure_says_docker_login_and_never_shows_the_password(context, tmp_path, monkeypatch):
    import docker

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    secret = "s3cret-Pa55word"
    config = tmp_path / "docker-config"
    config.mkdir()
    auth = base64.b64encode(f"someone:{secret}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    client = docker.DockerClient(base_url=images.engine_url())  # reads DOCKER_CONFIG, as a new process would
    stream = io.StringIO()
    try:
        with pytest.raises(images.RegistryAuthError) as error:
            images.publish(client, context(), f"{host}/team", progress=Progress(stream, True))
    finally:
        server.shutdown()
        client.close()
    message = str(error.value)
    assert message.startswith(f"The image registry {host} refused access to {host}/team/core_proj:")
    assert f"run `docker login {host}`" in message
    assert secret not in message and auth not in message
    assert secret not in stream.getvalue() and auth not in stream.getvalue()


def test_engine_not_running_says_how_to_start_it(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__main__.py").write_text("print(1)\n")
    stale = tmp_path / "docker.sock"
    stale.touch()  # a socket path nobody listens on
    monkeypatch.setenv("DOCKER_HOST", f"unix://{stale}")
    spec = xm.PythonContainer(entrypoint=xm.ModuleName("pkg"), path=str(root), base_image=BASE)
    with pytest.raises(images.EngineUnavailableError) as error:
        images.publish(None, images.python_container_context(spec), f"{REGISTRY}/xcore-core-test")
    assert str(error.value).startswith(f"Cannot reach the container engine at unix://{stale} (")
    assert "Start Docker" in str(error.value) and "DOCKER_HOST" in str(error.value)
