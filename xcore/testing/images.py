"""Test helpers for backends that build and push images with ``xcore.images``.

``require_docker_and_registry()`` makes a test need the real engine and registry (failing in CI,
skipping with the reason elsewhere, as ``require_service`` does); ``removing_built_images()``
removes from the engine whatever the code under test built or tagged, so repeated runs keep the
engine small (the registry keeps what was pushed)."""

from __future__ import annotations

import contextlib
import subprocess
import urllib.request
from collections.abc import Iterator

#: The registry the repository's own test services run (``scripts/infra/registry.sh``).
LOCAL_REGISTRY = "127.0.0.1:5000"


def registry_up(registry: str = LOCAL_REGISTRY) -> bool:
    """True when ``registry`` (``host:port``, plain HTTP) answers its ``/v2/`` API."""
    try:
        with urllib.request.urlopen(f"http://{registry}/v2/", timeout=3) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


def docker_up() -> bool:
    """True when the local container engine answers ``docker info``."""
    try:
        return subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def require_docker_and_registry(registry: str = LOCAL_REGISTRY) -> None:
    from xcore.testing import require_service

    require_service("docker", docker_up)
    require_service("registry", lambda: registry_up(registry))


@contextlib.contextmanager
def removing_built_images() -> Iterator[None]:
    from xcore import images

    before = len(images.BUILDS), len(images.PUSHES)
    try:
        yield
    finally:
        refs = sorted(set(images.BUILDS[before[0]:]) | set(images.PUSHES[before[1]:]))
        if refs:
            subprocess.run(["docker", "rmi", "-f", *refs], capture_output=True, check=False)
