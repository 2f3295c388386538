"""Running commands on a cluster: over one reused SSH connection, or on this machine.

``connect(cluster)`` returns a ``Transport`` cached for the process. Over SSH it is the
OpenSSH client multiplexed over one master connection that later commands and later xcore
processes share until it has been idle ``control_persist`` seconds, so a launch, a status poll
or a log read from a new process costs one ``ssh`` exec, not a handshake (paramiko, in
``paramiko_fallback``, only where no ``ssh`` program exists). Host keys are always verified.
"""

from __future__ import annotations

import atexit
import hashlib
import math
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import attrs

from xcore.plugin import LaunchError
from xhpc.config import Cluster

T = TypeVar("T")


class ClusterConnectionError(LaunchError):
    """The cluster cannot be reached, or refused us (auth, host key).

    ``retryable`` is True for a connection that dropped mid-command (worth retrying when the
    command is idempotent), False for refusals (auth, host key) that a retry cannot fix.
    """

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class RemoteCommandError(LaunchError):
    """A command on the cluster exited non-zero."""

    def __init__(self, message: str, result: Result | None = None) -> None:
        super().__init__(message)
        self.result = result


@attrs.frozen
class Result:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()


def shell_path(path: str) -> str:
    """A path as a shell word, keeping a leading ``~/`` meaning the (remote) home directory."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


INLINE_COMMAND_MAX = 32 * 1024
_RUN_FROM_STDIN = (
    'xhpc_f=$(mktemp "${TMPDIR:-/tmp}/xhpc-cmd.XXXXXX") || exit 1; cat > "$xhpc_f"; '
    '/bin/bash "$xhpc_f" </dev/null; xhpc_rc=$?; rm -f "$xhpc_f"; exit $xhpc_rc'
)


class Transport:
    """Runs shell commands (bash) on the cluster's login node and copies files to it."""

    cluster: Cluster
    bytes_uploaded: int = 0
    calls: int = 0

    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None) -> Result:
        """Run ``command`` with bash. A long command (a cancel of a big sweep, a status query
        over many runs) travels as stdin into a private temporary file that bash then runs
        with stdin closed: a command line is capped (128 KiB per argument locally, one SSH
        packet remotely), stdin is not."""
        if stdin is None and len(command) > INLINE_COMMAND_MAX:
            stdin = command.encode("utf-8", "surrogateescape")
            command = _RUN_FROM_STDIN
        return self._run(command, stdin, timeout)

    def _run(self, command: str, stdin: bytes | None, timeout: float | None) -> Result:
        raise NotImplementedError

    def put(self, local: str, remote: str) -> None:
        raise NotImplementedError

    def stream(self, command: str) -> Iterator[bytes]:
        raise NotImplementedError

    def check(self, command: str, what: str, stdin: bytes | None = None, timeout: float | None = None) -> Result:
        result = self.run(command, stdin, timeout)
        if result.returncode != 0:
            raise RemoteCommandError(
                f"{what} failed on cluster {self.cluster.name!r} ({self.cluster.address}), exit {result.returncode}: "
                f"{result.err or result.out.strip() or 'no output'}",
                result,
            )
        return result

    def close(self) -> None:
        pass


class LocalTransport(Transport):
    """Login-node mode: the scheduler commands are on this machine."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def _run(self, command: str, stdin: bytes | None, timeout: float | None) -> Result:
        self.calls += 1
        proc = subprocess.run(["/bin/bash", "-c", command], input=stdin or b"", capture_output=True,
                              timeout=timeout, cwd=os.path.expanduser("~"))
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def put(self, local: str, remote: str) -> None:
        target = Path(os.path.expanduser(remote))
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        import shutil

        shutil.copyfile(local, tmp)
        os.replace(tmp, target)
        self.bytes_uploaded += target.stat().st_size

    def stream(self, command: str) -> Iterator[bytes]:
        proc = subprocess.Popen(["/bin/bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=os.path.expanduser("~"))
        try:
            assert proc.stdout is not None
            while chunk := proc.stdout.read1(65536):  # type: ignore[attr-defined]
                yield chunk
        finally:
            proc.kill()
            proc.wait()


class SSHTransport(Transport):
    """The OpenSSH client, multiplexed: the first command opens a master connection
    (``ControlMaster``) that stays open ``control_persist`` idle seconds and is shared by every
    later command of this and later xcore processes. A command is then one local ``ssh``
    process and one exec channel on the open connection: no handshake, no paramiko import.

    The control socket lives in a per-user 0700 directory (``control_dir``); the master exits
    by itself once idle. Host keys are always verified (``StrictHostKeyChecking=yes``), logins
    are non-interactive (``BatchMode``), and ``~/.ssh/config`` is not read (``-F none``): the
    cluster entry alone says how to connect. Exit status 255 is the ssh client's own failure
    (no command xhpc runs exits 255)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._ready: threading.Event | None = None

    # -- the command line ------------------------------------------------------------------

    def control_path(self) -> str:
        c = self.cluster
        ident = "\0".join(str(x) for x in (c.user, c.host, c.port, c.key, c.known_hosts, c.jump))
        path = str(control_dir() / hashlib.sha256(ident.encode()).hexdigest()[:20])
        if len(path) > 90:  # a socket path holds 107 bytes, and ssh appends 17 while creating it
            raise ClusterConnectionError(f"The SSH control socket path {path} is too long for a Unix socket; set "
                                         "XHPC_SSH_CONTROL_DIR to a shorter directory.")
        return path

    def _options(self, user: str | None, host: str, port: int) -> list[str]:
        c = self.cluster
        argv = [_ssh_program(), "-F", "none", "-T", "-p", str(port), "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", f"ConnectTimeout={max(1, math.ceil(c.connect_timeout))}",
                "-o", "ServerAliveInterval=30", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR"]
        if c.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={os.path.expanduser(c.known_hosts)}"]
        if c.key:
            argv += ["-i", os.path.expanduser(c.key), "-o", "IdentitiesOnly=yes"]
        if user:
            argv += ["-l", user]
        return argv

    def _jump(self) -> tuple[list[str], str]:
        """The jump host's ssh options (same key and known_hosts checks) and its host name."""
        juser, _, jhostport = (self.cluster.jump or "").rpartition("@")
        jhost, _, jport = jhostport.partition(":")
        return self._options(juser or self.cluster.user, jhost, int(jport or 22)), jhost

    def argv(self, *remote: str, master: bool = True) -> list[str]:
        """The ``ssh`` command line that runs ``remote`` on the cluster (over the shared connection)."""
        c = self.cluster
        argv = self._options(c.user, c.host or "", c.port)
        if c.jump:
            options, jhost = self._jump()
            argv += ["-o", "ProxyCommand=" + shlex.join(options + ["-W", "%h:%p", "--", jhost])]
        if master and c.control_persist > 0:
            argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_path()}",
                     "-o", f"ControlPersist={c.control_persist}"]
        else:
            argv += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        return argv + ["--", c.host or "", *remote]

    def _preflight(self, wait: bool = True) -> None:
        c = self.cluster
        if c.known_hosts and not Path(os.path.expanduser(c.known_hosts)).is_file():
            raise ClusterConnectionError(
                f"Cluster {c.name!r}: known_hosts file {os.path.expanduser(c.known_hosts)} does not exist. Create it "
                f"with `ssh-keyscan -p {c.port} {c.host} >> {c.known_hosts}` after checking the key's fingerprint "
                "with your admins."
            )
        ready = self._ready
        if wait and ready is not None:  # a prewarm is opening the master: share it rather than race it
            ready.wait(2 * c.connect_timeout + 5)

    # -- commands --------------------------------------------------------------------------

    def _run(self, command: str, stdin: bytes | None, timeout: float | None,
             stdin_file: str | None = None, wait: bool = True) -> Result:
        self._preflight(wait)
        self.calls += 1
        argv = self.argv(f"/bin/bash -c {shlex.quote(command)}")
        try:
            if stdin_file is not None:
                with open(stdin_file, "rb") as handle:
                    proc = subprocess.run(argv, stdin=handle, capture_output=True, timeout=timeout)
            else:
                proc = subprocess.run(argv, input=stdin or b"", capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClusterConnectionError(
                f"A command on cluster {self.cluster.name!r} ({self.cluster.address}) did not finish within "
                f"{timeout:g} s.", retryable=True) from exc
        except FileNotFoundError as exc:
            raise ClusterConnectionError(f"Cannot run the ssh client: {exc}.") from exc
        if proc.returncode == 255:
            error = self._explain(proc.stderr.decode("utf-8", "replace"))
            if self.cluster.jump and error.retryable:
                error = self._explain_jump() or error
            raise error
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def put(self, local: str, remote: str) -> None:
        """Streams the file into a private temporary name, then renames it into place."""
        tmp = f"{remote}.{os.getpid()}.part"
        q = shlex.quote
        result = self._run(f"umask 077 && cat > {q(tmp)} && mv -f {q(tmp)} {q(remote)}", None, None, local)
        if result.returncode != 0:
            raise ClusterConnectionError(f"Uploading {local} to {self.cluster.name}:{remote} failed: {result.err}",
                                         retryable=True)
        self.bytes_uploaded += os.path.getsize(local)

    def stream(self, command: str) -> Iterator[bytes]:
        self._preflight()
        proc = subprocess.Popen(self.argv(f"/bin/bash -c {shlex.quote(command)}"), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert proc.stdout is not None
            while chunk := proc.stdout.read1(65536):  # type: ignore[attr-defined]
                yield chunk
        finally:
            proc.kill()
            proc.wait()

    def warm(self) -> None:
        """Open the shared connection unless one is open (errors are left for the next command)."""
        if self.cluster.control_persist <= 0 or os.path.exists(self.control_path()):
            return
        try:
            self._run("true", None, 2 * self.cluster.connect_timeout + 5, wait=False)
        except (LaunchError, OSError):
            pass

    def _drop(self) -> None:
        """Close the shared connection (every command in flight on it ends)."""
        if os.path.exists(self.control_path()):
            argv = self.argv()
            argv[-2:-1] = []
            subprocess.run(argv[:1] + ["-O", "exit"] + argv[1:], capture_output=True)

    def _explain_jump(self) -> ClusterConnectionError | None:
        """Why the jump host failed, when it did: a shared connection's ssh discards the jump's
        own messages (host key, login), so ask the jump host alone."""
        options, jhost = self._jump()
        try:
            proc = subprocess.run(options + ["--", jhost, "true"], capture_output=True,
                                  timeout=self.cluster.connect_timeout + 5)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 255:
            return None
        jport = int(options[options.index("-p") + 1])
        return self._explain(proc.stderr.decode("utf-8", "replace"), f"jump host {self.cluster.jump}", jhost, jport)

    def _explain(self, stderr: str, hop: str | None = None, host: str | None = None,
                 port: int | None = None) -> ClusterConnectionError:
        c = self.cluster
        where = f"the {hop} of cluster {c.name!r}" if hop else f"cluster {c.name!r} ({c.address})"
        text = " ".join(line.strip() for line in stderr.splitlines() if line.strip()) or "ssh failed"
        low = text.lower()
        known = c.known_hosts or "~/.ssh/known_hosts"
        if "remote host identification has changed" in low or "host key for" in low and "has changed" in low:
            return ClusterConnectionError(f"The host key of {where} does not match {known}: "
                                          f"{_host_key_change(stderr) or text}. Someone may be intercepting the "
                                          "connection; ask your admins.")
        if "host key verification failed" in low or "no ed25519 host key is known" in low \
                or "host key is known" in low:
            return ClusterConnectionError(
                f"The host key of {where} is not in {known}, so xhpc will not connect (host keys are always "
                f"verified). Add it with `ssh-keyscan -p {port or c.port} {host or c.host} >> {known}` after "
                "checking its fingerprint, or set known_hosts in the cluster's entry."
            )
        if "permission denied" in low:
            key = f"key {c.key}" if c.key else "your SSH agent and default keys"
            return ClusterConnectionError(f"SSH login to {where} was refused ({text}). Tried {key}; set `key` in "
                                          f"[clusters.{c.name}] or check the user name.")
        if "banner exchange" in low or "timed out" in low and "connect to host" not in low:
            return ClusterConnectionError(
                f"The SSH server of {where} accepted the connection but did not answer within "
                f"{c.connect_timeout:g} s ({text}). Check that sshd there is healthy, or raise connect_timeout in "
                f"[clusters.{c.name}]."
            )
        if "could not resolve hostname" in low:
            return ClusterConnectionError(f"Cannot resolve the host name of {where}: {text}.")
        if "no such identity" in low or "bad configuration option" in low or "bad port" in low:
            return ClusterConnectionError(f"Cannot connect to {where}: {text}.")
        return ClusterConnectionError(f"The connection to {where} failed or dropped: {text}.", retryable=True)


def _host_key_change(stderr: str) -> str:
    """The lines of OpenSSH's changed-host-key warning that say something about this host: the
    fingerprint it sent, the offending known_hosts entry, the refusal; not its ``@@@`` banner
    or the generic advice around it."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.lstrip().startswith("@")]
    kept = []
    for index, line in enumerate(lines):
        low = line.lower()
        if low.startswith("the fingerprint for") and index + 1 < len(lines):
            kept.append(f"{line} {lines[index + 1]}")
        elif low.startswith(("offending", "host key for", "remote host key for")):
            kept.append(line.rstrip("."))
    return "; ".join(kept)


def control_dir() -> Path:
    """The per-user directory of control sockets: 0700, owned by this user, not a symlink
    (``XHPC_SSH_CONTROL_DIR`` moves it). Only this user can reach a shared connection."""
    override = os.environ.get("XHPC_SSH_CONTROL_DIR")
    if override:
        path = Path(override)
    else:
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        base = Path(runtime) if runtime and os.path.isdir(runtime) else Path(tempfile.gettempdir())
        path = base / f"xcore-ssh-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, parents=bool(override))
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ClusterConnectionError(f"{path} is not a directory owned by you; remove it (or set XHPC_SSH_CONTROL_DIR) "
                                     "so xhpc can keep its SSH control sockets private.")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _ssh_program() -> str:
    return shutil.which("ssh") or "ssh"

_cache: dict[tuple[str, bool], Transport] = {}
_cache_lock = threading.Lock()


def connect(cluster: Cluster) -> Transport:
    """The process's transport for ``cluster`` (created on first use, reused afterwards)."""
    key = (cluster.name, cluster.is_local)
    with _cache_lock:
        transport = _cache.get(key)
        if transport is None or transport.cluster != cluster:
            if cluster.is_local:
                transport = LocalTransport(cluster)
            elif cluster.ssh == "paramiko" or shutil.which("ssh") is None:
                from xhpc.paramiko_fallback import ParamikoTransport

                transport = ParamikoTransport(cluster)
            else:
                transport = SSHTransport(cluster)
            _cache[key] = transport
        return transport


def prewarm(cluster_name: str | None, scheduler: str, local: bool) -> None:
    """Open the SSH connection in the background, so the handshake overlaps the launch
    script's own work (nothing to do when a shared connection is already open). Errors are
    left for the launch itself to report."""
    if local:
        return
    key = (cluster_name, scheduler)
    with _cache_lock:
        if key in _warming:
            return
        _warming.add(key)
    try:
        from xhpc import config

        cluster = config.resolve(cluster_name, scheduler)
        if cluster.is_local:
            return
        transport = connect(cluster)
    except Exception:  # reported by the launch
        return
    if isinstance(transport, SSHTransport):
        if cluster.control_persist <= 0 or os.path.exists(transport.control_path()):
            return
        ready = transport._ready = threading.Event()

        def warm() -> None:
            try:
                transport.warm()
            finally:
                ready.set()
                transport._ready = None
    else:
        def warm() -> None:
            try:
                transport._client()  # type: ignore[attr-defined]
            except Exception:
                pass

    threading.Thread(target=warm, name="xhpc-prewarm", daemon=True).start()


_warming: set[tuple[str | None, str]] = set()


def reset() -> None:
    """Close every cached connection (tests; also at exit)."""
    with _cache_lock:
        transports = list(_cache.values())
        _cache.clear()
        _warming.clear()
    for transport in transports:
        transport.close()


atexit.register(reset)


def retrying(action: Callable[[], T], attempts: int = 4, first_delay: float = 0.5) -> T:
    """Run an idempotent remote action, retrying dropped connections with exponential backoff."""
    delay = first_delay
    for attempt in range(attempts):
        try:
            return action()
        except ClusterConnectionError as exc:
            if not exc.retryable or attempt == attempts - 1:
                raise
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")
