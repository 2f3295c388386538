"""One shared SSH connection across CLI processes, counted on the real sshd (issue 14).

A relay in front of sshd counts TCP connections and the bytes sent; a wrapper around the
``ssh`` program counts the commands each CLI process runs. Launches, relaunches and status
polls from new processes must reuse the open connection: no new handshake, one command each.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from xcore.testing import require_service
from xhpc_helpers import HOW, KNOWN_HOSTS, REMOTE_STAGING, LinkProxy, cluster_toml, service_up

LAUNCH = """
import sys
import xcore as xm
import xhpc

kind, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with xm.create_experiment(title=name) as experiment:
    if kind == "package":  # the directory as is (no pip): a content-addressed archive
        packageable = xm.python_module(xhpc.Slurm.Spec(), "relaunch_pkg.main", path=sys.argv[4])
    else:
        packageable = xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())
    [exe] = experiment.package([packageable])
    for i in range(n):
        experiment.add(xm.Job(exe, xhpc.Slurm(job_name=name, directives=["--hold"]), args={"seed": i}))
"""


@pytest.fixture
def ctl() -> Iterator[Path]:
    """A control socket directory of the test's own with a short path: a socket path holds 107
    bytes, and pytest's own temporary paths (longer still under xdist's workers) may not leave
    room for ``ctl/<20 hex digits>`` plus what ssh appends."""
    path = Path(tempfile.mkdtemp(prefix="xs-")) / "ctl"
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


class Link:
    """The relay, the ssh-command log and how to run the CLI through them."""

    def __init__(self, root: Path, proxy: LinkProxy, staging: str, ctl: Path) -> None:
        self.root = root
        self.ctl = ctl
        self.proxy = proxy
        self.staging = staging
        self.name = f"reuse{uuid.uuid4().hex[:8]}"  # the test's own job name: cleanup cancels only these
        self.log = root / "ssh-commands.log"
        wrapper_dir = root / "bin"
        wrapper_dir.mkdir()
        wrapper = wrapper_dir / "ssh"
        real = shutil.which("ssh")
        # One line per ssh command run (control requests `-O` excluded: they send no command).
        wrapper.write_text(f'#!/bin/sh\ncase " $* " in *" -O "*) ;; *) echo x >> {self.log} ;; esac\n'
                           f'exec {real} "$@"\n')
        wrapper.chmod(0o755)
        self.env = {**os.environ, "PATH": f"{wrapper_dir}:{os.environ['PATH']}",
                    "XHPC_SSH_CONTROL_DIR": str(ctl)}

    def commands(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def xcore(self, *argv: str) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([sys.executable, "-m", "xcore.cli.main", *argv], capture_output=True, text=True,
                             env=self.env, timeout=120, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        return out

    def measure(self, *argv: str) -> tuple[int, int, int]:
        """(new TCP connections, ssh commands, bytes sent) of one CLI process."""
        before = (self.proxy.connections, self.commands(), self.proxy.bytes_up)
        self.xcore(*argv)
        return (self.proxy.connections - before[0], self.commands() - before[1], self.proxy.bytes_up - before[2])


@pytest.fixture
def link(xcore_env: Path, tmp_path: Path, ctl: Path) -> Iterator[Link]:
    require_service("slurm", lambda: service_up("slurm"), HOW)
    require_service("sshd", lambda: service_up("sshd"), HOW)
    proxy = LinkProxy()
    staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    known = proxy.known_hosts(tmp_path / "known_hosts")
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "slurm", "ssh", staging, control_persist=60)
        .replace("port = 2222", f"port = {proxy.port}")
        .replace("/var/lib/xcore-infra/ssh/known_hosts", str(known)))
    link = Link(tmp_path, proxy, staging, ctl)
    yield link
    subprocess.run(["scancel", f"--name={link.name}"], capture_output=True, check=False)
    # Close the shared connection this test opened (its socket is in the test's own directory).
    for sock in ctl.glob("*"):
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"], capture_output=True, check=False)
    proxy.close()
    shutil.rmtree(staging, ignore_errors=True)


def _launch(link: Link, tmp_path: Path, kind: str, n: int, *extra: str) -> tuple[int, int, int]:
    script = tmp_path / "launch.py"
    script.write_text(LAUNCH)
    return link.measure("launch", str(script), "--", kind, str(n), link.name, *extra)


def test_launches_and_status_polls_share_one_connection(link: Link, tmp_path: Path) -> None:
    first = _launch(link, tmp_path, "command", 5)
    assert first[0] == 1, f"first launch: {first}"  # one handshake, kept open for later processes
    again = _launch(link, tmp_path, "command", 200)
    assert again[:2] == (0, 1), f"second launch (new process): {again}"  # no handshake, ONE command
    poll = link.measure("show", "2", "--json")  # the second launch's experiment
    assert poll[:2] == (0, 1), f"status poll from a new process: {poll}"
    assert link.proxy.connections == 1


def test_relaunch_of_unchanged_code_sends_no_package_bytes(link: Link, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "relaunch_pkg").mkdir(parents=True)
    (project / "relaunch_pkg" / "__init__.py").write_text("")
    # Incompressible, so the package's size shows in the bytes sent.
    (project / "relaunch_pkg" / "main.py").write_text("print(1)\n# " + os.urandom(150_000).hex() + "\n")
    first = _launch(link, tmp_path, "package", 3, str(project))
    stats = json.loads((Path(os.environ["XCORE_HOME"]) / "plugins" / "xhpc" / "last_launch.json").read_text())
    assert stats["artifact_bytes_uploaded"] > 150_000 and first[2] > 150_000
    again = _launch(link, tmp_path, "package", 3, str(project))
    stats = json.loads((Path(os.environ["XCORE_HOME"]) / "plugins" / "xhpc" / "last_launch.json").read_text())
    assert stats["artifact_bytes_uploaded"] == 0
    assert again[0] == 0 and again[1] == 1, f"relaunch: {again}"
    assert again[2] < 20_000, f"relaunch sent {again[2]} bytes"


def test_stale_staging_path_and_missing_artifacts_are_caught_before_submitting(link: Link, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "relaunch_pkg").mkdir(parents=True)
    (project / "relaunch_pkg" / "__init__.py").write_text("")
    (project / "relaunch_pkg" / "main.py").write_text("print(1)\n")
    _launch(link, tmp_path, "package", 2, str(project))
    state = Path(os.environ["XCORE_HOME"]) / "plugins" / "xhpc"
    roots = json.loads((state / "staging-roots.json").read_text())
    assert list(roots.values()) == [link.staging]
    # Someone cleaned the cluster's artifacts: the one-command launch notices, uploads, submits.
    shutil.rmtree(f"{link.staging}/artifacts")
    again = _launch(link, tmp_path, "package", 2, str(project))
    assert again[1] == 3, again  # guarded submit (stopped), upload, submit
    # A remembered path that is wrong: nothing is submitted from it; the launch starts over.
    (state / "staging-roots.json").write_text(json.dumps({k: "/nonexistent/elsewhere" for k in roots}))
    _launch(link, tmp_path, "package", 2, str(project))
    assert not Path("/nonexistent/elsewhere").exists()
    assert json.loads((state / "staging-roots.json").read_text()) == roots
    ids = subprocess.run(["squeue", "-h", "--name", link.name, "-o", "%F"], capture_output=True, text=True,
                         check=True).stdout.split()
    assert len(set(ids)) == 3  # three launches, one array job each: no duplicate, none lost


def test_shared_connection_closes_after_its_idle_timeout(xcore_env: Path, ctl: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    require_service("sshd", lambda: service_up("sshd"), HOW)
    staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    config = cluster_toml("test", "slurm", "ssh", staging, control_persist=1)
    (xcore_env / "config" / "clusters.toml").write_text(config)
    monkeypatch.setenv("XHPC_SSH_CONTROL_DIR", str(ctl))
    out = subprocess.run([sys.executable, "-m", "xcore.cli.main", "cluster", "check", "test"], capture_output=True,
                         text=True, timeout=60, check=False)
    shutil.rmtree(staging, ignore_errors=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert stat.S_IMODE(ctl.stat().st_mode) == 0o700
    deadline = time.monotonic() + 15
    while list(ctl.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(ctl.iterdir()) == [], "the idle master connection did not exit"


def test_control_directory_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xhpc.transport import ClusterConnectionError, control_dir

    loose = tmp_path / "loose"
    loose.mkdir(mode=0o777)
    loose.chmod(0o777)
    monkeypatch.setenv("XHPC_SSH_CONTROL_DIR", str(loose))
    assert stat.S_IMODE(control_dir().stat().st_mode) == 0o700  # tightened before any socket is made
    link = tmp_path / "link"
    link.symlink_to(loose)
    monkeypatch.setenv("XHPC_SSH_CONTROL_DIR", str(link))
    with pytest.raises(ClusterConnectionError, match="not a directory owned by you"):
        control_dir()
    if os.getuid() == 0:
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, 65534, 65534)
        monkeypatch.setenv("XHPC_SSH_CONTROL_DIR", str(other))
        with pytest.raises(ClusterConnectionError, match="not a directory owned by you"):
            control_dir()


def test_jump_host_uses_the_same_host_key_checks(link: Link) -> None:
    """Through a jump host (the real sshd, forwarding to the relay): the target is reached via
    the jump (the relay sees a connection), and each hop checks its host key."""
    config = Path(os.environ["XCORE_CONFIG_DIR"]) / "clusters.toml"
    config.write_text(config.read_text() + 'jump = "xcore@127.0.0.1:2222"\n')
    known = link.root / "known_hosts"  # the relay's entry; the jump host's real one added
    known.write_text(known.read_text() + Path(KNOWN_HOSTS).read_text())
    before = link.proxy.connections
    out = link.xcore("cluster", "check", "test")
    assert out.stdout.count("ok ") == 3, out.stdout
    assert link.proxy.connections == before + 1
    # A jump host whose key is unknown is refused like the target would be.
    config.write_text(config.read_text().replace('jump = "xcore@127.0.0.1:2222"', 'jump = "xcore@localhost:2222"'))
    for sock in link.ctl.glob("*"):
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"], capture_output=True, check=False)
    refused = subprocess.run([sys.executable, "-m", "xcore.cli.main", "cluster", "check", "test"],
                             capture_output=True, text=True, env=link.env, timeout=60, check=False)
    assert refused.returncode == 1 and "host key" in refused.stdout, refused.stdout + refused.stderr


def test_too_long_control_path_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xhpc.config import Cluster
    from xhpc.transport import ClusterConnectionError, SSHTransport

    monkeypatch.setenv("XHPC_SSH_CONTROL_DIR", str(tmp_path / ("d" * 80)))
    with pytest.raises(ClusterConnectionError, match="too long for a Unix socket"):
        SSHTransport(Cluster(name="c", host="h")).control_path()


@pytest.mark.parametrize("client", ["openssh", "paramiko"])
def test_paramiko_is_imported_only_as_the_fallback(xcore_env: Path, ctl: Path, client: str) -> None:
    require_service("sshd", lambda: service_up("sshd"), HOW)
    staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", "slurm", "ssh", staging, ssh=client))
    code = ("import sys\nfrom xhpc import config, transport\n"
            "t = transport.connect(config.resolve('test'))\n"
            "print(t.check('echo ok', 'echo').out.strip(), type(t).__name__, 'paramiko' in sys.modules)\n")
    env = {**os.environ, "XHPC_SSH_CONTROL_DIR": str(ctl)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    expected = "ok SSHTransport False" if client == "openssh" else "ok ParamikoTransport True"
    assert out.stdout.strip() == expected
    for sock in ctl.glob("*"):
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"], capture_output=True, check=False)


@pytest.mark.parametrize("line,message", [('ssh = "putty"', 'use "openssh" or "paramiko"'),
                                          ("control_persist = -1", "whole number of seconds"),
                                          ('control_persist = "5m"', "whole number of seconds")])
def test_bad_ssh_settings_are_clear_errors(xcore_env: Path, line: str, message: str) -> None:
    from xcore.plugin import ConfigurationError
    from xhpc import config

    (xcore_env / "config" / "clusters.toml").write_text(f'[clusters.c]\nhost = "h"\n{line}\n')
    with pytest.raises(ConfigurationError, match=message):
        config.load_clusters()
