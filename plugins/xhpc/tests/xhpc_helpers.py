"""Shared by the xhpc tests (not conftest.py, whose name the core tests use too): fixtures and
helpers; a cluster config per (scheduler, mode) against the real services.

Real services come from ``scripts/infra/setup.sh slurm sge sshd``: Slurm (partition debug,
with slurmdbd), SGE (queue all.q), and sshd on 127.0.0.1:2222 as user ``xcore``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from xcore.testing import require_service

SSH_KEY = "/var/lib/xcore-infra/ssh/id_ed25519"
KNOWN_HOSTS = "/var/lib/xcore-infra/ssh/known_hosts"
REMOTE_STAGING = "/home/xcore/xcore-staging"
HOW = "run `bash scripts/infra/setup.sh slurm sge sshd` as root"


def _ok(argv: list[str], timeout: float = 10) -> bool:
    if shutil.which(argv[0]) is None:
        return False
    try:
        return subprocess.run(argv, capture_output=True, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_checked: dict[str, bool] = {}


def service_up(name: str) -> bool:
    if name not in _checked:
        if name == "slurm":
            _checked[name] = _ok(["sinfo", "-h"]) and _ok(["sacct", "-n", "-X", "-S", "now"])
        elif name == "sge":
            _checked[name] = _ok(["qstat", "-g", "c"])
        elif name == "sshd":
            _checked[name] = os.path.exists(SSH_KEY) and _ok(
                ["ssh", "-p", "2222", "-i", SSH_KEY, "-o", f"UserKnownHostsFile={KNOWN_HOSTS}", "-o", "BatchMode=yes",
                 "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5", "xcore@127.0.0.1", "true"])
        else:
            _checked[name] = False
    return _checked[name]


def cluster_toml(name: str, scheduler: str, mode: str, staging: str, **extra: object) -> str:
    lines = [f"[clusters.{name}]", f'scheduler = "{scheduler}"', f'staging = "{staging}"']
    if mode == "ssh":
        lines += ['host = "127.0.0.1"', "port = 2222", 'user = "xcore"', f'key = "{SSH_KEY}"',
                  f'known_hosts = "{KNOWN_HOSTS}"']
    else:
        lines += ["local = true"]
    for key, value in extra.items():
        lines.append(f"{key} = {value!r}".replace("'", '"'))
    return "\n".join(lines) + "\n"


@pytest.fixture
def xcore_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Own XCORE_HOME and XCORE_CONFIG_DIR, a fresh plugin host and no cached SSH connections."""
    import xcore.hooks.host
    from xhpc import transport

    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("XCORE_CLUSTER", raising=False)
    monkeypatch.delenv("XCORE_STORE", raising=False)
    (tmp_path / "config").mkdir()
    xcore.hooks.host.reset_host()
    transport.reset()
    yield tmp_path
    transport.reset()
    xcore.hooks.host.reset_host()


@pytest.fixture(params=[("slurm", "ssh"), ("slurm", "local"), ("sge", "ssh"), ("sge", "local")],
                ids=["slurm-ssh", "slurm-login", "sge-ssh", "sge-login"])
def cluster(request: pytest.FixtureRequest, xcore_env: Path) -> dict[str, str]:
    """A configured cluster named ``test`` for one (scheduler, mode); the test's default cluster."""
    scheduler, mode = request.param
    require_service(scheduler, lambda: service_up(scheduler), HOW)
    if mode == "ssh":
        require_service("sshd", lambda: service_up("sshd"), HOW)
        staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    else:
        staging = str(xcore_env / "staging")
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", scheduler, mode, staging))
    yield {"name": "test", "scheduler": scheduler, "mode": mode, "staging": staging}
    if mode == "ssh":
        shutil.rmtree(staging, ignore_errors=True)  # same file system here; keeps the xcore home small


def executor_class(cluster: dict[str, str]) -> type:
    import xhpc

    return xhpc.GridEngine if cluster["scheduler"] == "sge" else xhpc.Slurm


def read_remote(cluster: dict[str, str], path: str) -> bytes:
    """A file on the cluster (the same file system here, readable as root)."""
    return Path(path).read_bytes()


class LinkProxy:
    """A TCP relay on 127.0.0.1 in front of the real sshd; ``cut()`` closes every connection
    relayed so far for real (both sockets), as a dropped network link does. Connections made
    afterwards are relayed normally, so a client's reconnect works."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 2222)) -> None:
        import socket
        import threading

        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.cuts = 0
        self.bytes_up = 0  # client -> sshd, everything relayed so far
        self._live: list[object] = []
        self._lock = threading.Lock()
        self._closed = False
        self.refusing = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="link-proxy")
        self._acceptor.start()

    def _accept(self) -> None:
        import socket
        import struct
        import threading

        while not self._closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self._closed:  # the wake-up connection of close()
                client.close()
                return
            if self.refusing:  # reset at once: the client reads "connection reset", never a banner
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self._lock:
                if self.refusing:  # the link went down while this one was being set up
                    for sock in (client, upstream):
                        sock.close()
                    continue
                self.connections += 1
                self._live += [client, upstream]
            for a, b, up in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(a, b, up), daemon=True).start()

    def _pump(self, src: object, dst: object, up: bool) -> None:
        try:
            while data := src.recv(65536):  # type: ignore[attr-defined]
                if up:
                    with self._lock:
                        self.bytes_up += len(data)
                dst.sendall(data)  # type: ignore[attr-defined]
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.close()  # type: ignore[attr-defined]
            except OSError:
                pass

    def cut(self) -> None:
        import socket

        with self._lock:
            live, self._live = self._live, []
            self.cuts += 1
        for sock in live:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # type: ignore[attr-defined]
                sock.close()  # type: ignore[attr-defined]
            except OSError:
                pass

    def refuse(self) -> None:
        """The link goes down: every connection is cut, and each new one is reset as soon as it
        is accepted (no SSH server answers), until ``accept_again``. A connection being set up
        meanwhile is dropped too (the accepting thread checks under the same lock)."""
        with self._lock:
            self.refusing = True
        self.cut()

    def accept_again(self) -> None:
        """The link is back: new connections are relayed again."""
        self.refusing = False

    def known_hosts(self, path: Path) -> Path:
        """A known_hosts with the real server's key under the relay's address."""
        lines = Path(KNOWN_HOSTS).read_text().splitlines()
        path.write_text("".join(line.replace("[127.0.0.1]:2222", f"[127.0.0.1]:{self.port}") + "\n"
                                for line in lines if line.startswith("[127.0.0.1]:2222")))
        return path

    def close(self) -> None:
        """Stop accepting, then close the listening socket. Closing it under a thread blocked in
        ``accept`` is not enough: the next test's relay may get the same descriptor number, and
        this relay's thread then accepted (and relayed, uncounted) the next test's connections."""
        import socket

        self._closed = True
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()  # wake accept()
        except OSError:
            pass
        self._acceptor.join(10)
        self.server.close()
        self.cut()
