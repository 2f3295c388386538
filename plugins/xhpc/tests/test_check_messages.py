"""``xcore cluster check`` against the real sshd and Slurm (issue 30): a changed host key is
reported with the lines that matter, not OpenSSH's ``@@@`` banner, and the staging root the
check creates is private (0700) whatever the caller's umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from xcore.testing import require_service
from xhpc_helpers import HOW, KNOWN_HOSTS, cluster_toml, service_up


def _check(name: str = "test") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", "cluster", "check", name], capture_output=True,
                          text=True, timeout=60)


def test_a_changed_host_key_is_reported_without_the_banner(xcore_env: Path, tmp_path: Path) -> None:
    require_service("sshd", lambda: service_up("sshd"), HOW)
    key = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    wrong = tmp_path / "known_hosts"
    wrong.write_text("[127.0.0.1]:2222 " + " ".join(key.with_suffix(".pub").read_text().split()[:2]) + "\n")
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "slurm", "ssh", "/tmp/x").replace(KNOWN_HOSTS, str(wrong)))
    out = _check()
    assert out.returncode == 1
    assert "does not match" in out.stdout, out.stdout
    assert "@@@" not in out.stdout and "NASTY" not in out.stdout
    assert f"Offending ED25519 key in {wrong}:1" in out.stdout
    assert "SHA256:" in out.stdout


def test_the_staging_root_check_creates_is_private(xcore_env: Path, tmp_path: Path) -> None:
    require_service("slurm", lambda: service_up("slurm"), HOW)
    root = tmp_path / "new-root" / "staging"
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", "slurm", "local", str(root)))
    old = os.umask(0o022)
    try:
        out = _check()
    finally:
        os.umask(old)
    assert out.returncode == 0, out.stdout + out.stderr
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
