"""The SSH transport used where no OpenSSH client is installed: one fabric/paramiko connection
per process, commands as exec channels on it. Slower to start than the OpenSSH transport
(paramiko's import and a handshake in every CLI process) but needs nothing outside Python.
"""

from __future__ import annotations

import os
import shlex
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xhpc.config import Cluster
from xhpc.transport import ClusterConnectionError, Result, Transport

_TRANSIENT = (EOFError, ConnectionError, socket.timeout, TimeoutError)


class ParamikoTransport(Transport):
    """One fabric/paramiko connection; commands are exec channels on it. The fallback where no
    OpenSSH client is installed (``ssh = "paramiko"`` in the cluster entry forces it)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._conn: Any = None
        self._lock = threading.Lock()

    # -- connection ------------------------------------------------------------------------

    def _connection(self, host: str, user: str | None, port: int, gateway: Any = None) -> Any:
        import fabric
        import paramiko

        _quiet_paramiko()

        connect_kwargs: dict[str, Any] = {"banner_timeout": self.cluster.connect_timeout,
                                          "auth_timeout": self.cluster.connect_timeout}
        if self.cluster.key:
            connect_kwargs["key_filename"] = [os.path.expanduser(self.cluster.key)]
            connect_kwargs["look_for_keys"] = False
        conn = fabric.Connection(host, user=user, port=port, connect_kwargs=connect_kwargs, gateway=gateway,
                                 connect_timeout=self.cluster.connect_timeout)
        client = conn.client
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        known = self.cluster.known_hosts or "~/.ssh/known_hosts"
        known_path = Path(os.path.expanduser(known))
        if known_path.is_file():
            client.get_host_keys().load(str(known_path))
        elif self.cluster.known_hosts:
            raise ClusterConnectionError(
                f"Cluster {self.cluster.name!r}: known_hosts file {known_path} does not exist. Create it with "
                f"`ssh-keyscan -p {port} {host} >> {known_path}` after checking the key's fingerprint with your admins."
            )
        return conn

    def _open(self) -> Any:
        cluster = self.cluster
        gateway = None
        if cluster.jump:
            jump = cluster.jump
            juser, _, jhostport = jump.rpartition("@")
            jhost, _, jport = jhostport.partition(":")
            gateway = self._connection(jhost, juser or cluster.user, int(jport or 22))
        conn = self._connection(cluster.host or "", cluster.user, cluster.port, gateway)
        delay = 0.5
        deadline = time.monotonic() + 2 * cluster.connect_timeout  # a hung server must not hang xcore
        for attempt in range(4):
            try:
                conn.open()
                transport = conn.client.get_transport()
                transport.set_keepalive(30)
                return conn
            except Exception as exc:  # translated below; transient ones are retried while time remains
                error = self._explain(exc)
                transient = isinstance(exc, _TRANSIENT + (_no_valid_connections(),)) and not _unanswered(exc)
                if not transient or attempt == 3 or time.monotonic() + delay + cluster.connect_timeout > deadline:
                    raise error from exc
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def _explain(self, exc: BaseException) -> ClusterConnectionError:
        import paramiko

        c = self.cluster
        where = f"cluster {c.name!r} ({c.address})"
        text = str(exc)
        if isinstance(exc, paramiko.AuthenticationException):
            key = f"key {c.key}" if c.key else "your SSH agent and default keys"
            return ClusterConnectionError(f"SSH login to {where} was refused ({text}). Tried {key}; set `key` in "
                                          f"[clusters.{c.name}] or check the user name.")
        if isinstance(exc, paramiko.SSHException) and "known_hosts" in text:
            known = c.known_hosts or "~/.ssh/known_hosts"
            return ClusterConnectionError(
                f"The host key of {where} is not in {known}, so xhpc will not connect (host keys are always "
                f"verified). Add it with `ssh-keyscan -p {c.port} {c.host} >> {known}` after checking its "
                "fingerprint, or set known_hosts in the cluster's entry."
            )
        if isinstance(exc, paramiko.BadHostKeyException):
            return ClusterConnectionError(f"The host key of {where} does not match known_hosts: {text}. "
                                          "Someone may be intercepting the connection; ask your admins.")
        if _unanswered(exc):
            return ClusterConnectionError(
                f"The SSH server of {where} accepted the connection but did not answer within "
                f"{c.connect_timeout:g} s ({type(exc).__name__}: {text or 'timed out'}). Check that sshd there is "
                f"healthy, or raise connect_timeout in [clusters.{c.name}]."
            )
        if isinstance(exc, socket.gaierror):
            return ClusterConnectionError(f"Cannot resolve the host name of {where}: {text}.")
        return ClusterConnectionError(
            f"Cannot connect to {where}: {type(exc).__name__}: {text or 'connection failed'}.")

    def _client(self) -> Any:
        with self._lock:
            if self._conn is None or not self._conn.is_connected:
                self._conn = self._open()
            return self._conn.client

    # -- commands --------------------------------------------------------------------------

    def _run(self, command: str, stdin: bytes | None, timeout: float | None) -> Result:
        """Run once. A dropped connection raises ClusterConnectionError; callers decide on retries."""
        client = self._client()
        self.calls += 1
        try:
            chan = client.get_transport().open_session(timeout=self.cluster.connect_timeout)
            if timeout:
                chan.settimeout(timeout)
            chan.exec_command(f"/bin/bash -c {shlex.quote(command)}")
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
            out = chan.makefile("rb", -1).read()
            err = chan.makefile_stderr("rb", -1).read()
            code = chan.recv_exit_status()
            chan.close()
        except Exception as exc:
            self._drop()
            raise ClusterConnectionError(
                f"The connection to cluster {self.cluster.name!r} ({self.cluster.address}) dropped: "
                f"{type(exc).__name__}: {exc}", retryable=True,
            ) from exc
        if code == -1:
            self._drop()
            raise ClusterConnectionError(
                f"The connection to cluster {self.cluster.name!r} dropped before the command ended.", retryable=True)
        return Result(code, out, err)

    def put(self, local: str, remote: str) -> None:
        client = self._client()
        try:
            sftp = client.open_sftp()
            try:
                tmp = f"{remote}.{os.getpid()}.part"
                sftp.put(local, tmp, confirm=True)
                sftp.posix_rename(tmp, remote)
            finally:
                sftp.close()
        except Exception as exc:
            self._drop()
            raise ClusterConnectionError(f"Uploading {local} to {self.cluster.name}:{remote} failed: {exc}",
                                         retryable=True) from exc
        self.bytes_uploaded += os.path.getsize(local)

    def stream(self, command: str) -> Iterator[bytes]:
        client = self._client()
        chan = client.get_transport().open_session()
        chan.set_combine_stderr(True)
        chan.exec_command(f"/bin/bash -c {shlex.quote(command)}")
        chan.shutdown_write()
        try:
            while True:
                data = chan.recv(65536)
                if not data:
                    break
                yield data
        finally:
            chan.close()

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def close(self) -> None:
        self._drop()


def _quiet_paramiko() -> None:
    """paramiko's transport thread logs failures with tracebacks; without a handler Python
    prints them on stderr. xhpc reports every failure itself, in one line."""
    import logging

    logger = logging.getLogger("paramiko")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


def _unanswered(exc: BaseException) -> bool:
    """The TCP connection was made but the server never finished the SSH handshake in time
    (paramiko reports that in several ways, depending on the step it was waiting in)."""
    import paramiko

    text = str(exc).lower()
    if isinstance(exc, paramiko.SSHException):
        return any(s in text for s in ("banner", "no existing session", "negotiation timed out",
                                       "authentication timeout", "timed out"))
    return False


def _no_valid_connections() -> type:
    from paramiko.ssh_exception import NoValidConnectionsError

    return NoValidConnectionsError
