"""Connecting to a Docker-compatible engine (Docker, or Podman's Docker API socket).

The ``docker`` SDK is optional (``pip install 'xcore-core[images]'``, which
``xcore-xlocal[docker]`` includes) and imported here, only when an image is built or run.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from xcore.plugin import ConfigurationError

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"

_clients: dict[tuple[str, str, str], Any] = {}
_lock = threading.Lock()


class EngineUnavailableError(ConfigurationError):
    """The docker SDK is missing or the engine does not answer."""


def import_docker() -> Any:
    try:
        import docker
    except ImportError:
        raise EngineUnavailableError(
            "Containers need the docker SDK, which is not installed: pip install 'xcore-core[images]' "
            "(also in pip install 'xcore-xlocal[docker]', 'xcore-xk8s[images]' and 'xcore-xgcp[images]')"
        ) from None
    return docker


def engine_url() -> str:
    """The engine this process would use: ``DOCKER_HOST``, else the local Docker socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def connect(base_url: str | None = None) -> Any:
    """A ``docker.DockerClient`` for ``base_url`` (default: the environment's engine).

    Clients are reused within a process. Raises EngineUnavailableError with what to do.
    """
    url = base_url or engine_url()
    key = (url, os.environ.get("DOCKER_TLS_VERIFY", ""), os.environ.get("DOCKER_CERT_PATH", ""))
    with _lock:
        client = _clients.get(key)
    if client is not None:
        return client
    docker = import_docker()
    try:
        if url == engine_url():
            client = docker.from_env()
        else:
            client = docker.DockerClient(base_url=url)
    except docker.errors.DockerException as exc:
        raise EngineUnavailableError(unreachable_message(url, exc)) from exc
    with _lock:
        _clients[key] = client
    return client


def forget(base_url: str | None = None) -> None:
    """Drop a cached client (after the engine restarted, or in tests)."""
    url = base_url or engine_url()
    with _lock:
        for key in [k for k in _clients if k[0] == url]:
            _clients.pop(key).close()


def unreachable_message(url: str, exc: BaseException) -> str:
    reason = str(exc).split("\n")[0]
    return (
        f"Cannot reach the container engine at {url} ({reason}). Start Docker (as root: `dockerd &`, or "
        "`sudo systemctl start docker`; in this repository `sudo bash scripts/infra/docker.sh`), or set "
        "DOCKER_HOST to a running engine, e.g. DOCKER_HOST=unix:///run/podman/podman.sock after "
        "`podman system service --time=0 unix:///run/podman/podman.sock &`."
    )
