"""Read-only questions to the local engine without the ``docker`` SDK.

Importing the SDK costs about half a second (it loads ``requests`` and, when installed,
``paramiko``), more than everything else an unchanged relaunch does. So ``publish`` first asks
the engine's socket directly, with the standard library, the two things the skip needs: a
base image's id and whether the registry serves a tag. Anything else (another kind of
``DOCKER_HOST``, TLS settings, a missing base image, a registry that wants credentials) is
left to the SDK, which knows about contexts, TLS and ``docker login``.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from typing import Any
from urllib.parse import quote

from xcore.images.engine import engine_url

TIMEOUT = 30.0


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=TIMEOUT)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(TIMEOUT)
        sock.connect(self._path)
        self.sock = sock


class Probe:
    """GETs on the engine's unix socket; each answer is ``(status, json or {})``."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def from_env(cls) -> Probe | None:
        """A probe for the environment's engine, or None when only the SDK should talk to it."""
        url = engine_url()
        if not url.startswith("unix://") or os.environ.get("DOCKER_TLS_VERIFY") or os.environ.get("DOCKER_CONTEXT"):
            return None
        path = url[len("unix://"):]
        return cls(path) if os.path.exists(path) else None

    def get(self, path: str) -> tuple[int, Any]:
        connection = _UnixConnection(self.path)
        try:
            connection.request("GET", quote(path, safe="/:@"))
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            data = {"message": body.decode("utf-8", "replace")}
        return response.status, data

    def image_id(self, reference: str) -> str | None:
        status, data = self.get(f"/images/{reference}/json")
        return str(data.get("Id")) if status == 200 and data.get("Id") else None

    def distribution(self, reference: str) -> tuple[int, Any]:
        return self.get(f"/distribution/{reference}/json")
