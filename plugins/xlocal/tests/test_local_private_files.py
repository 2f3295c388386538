"""xlocal's run directories, job logs and runner files are private to the user, as everything
xcore writes locally (moved from the core's tests/test_private_files.py, which checks the store
and a backend's state on the fake backend)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from xlocal_helpers import run_xcore, write_script

pytestmark = pytest.mark.usefixtures("xcore_home")


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A world-traversable parent (as a home directory usually is) and the common umask 022."""
    parent = Path(tempfile.mkdtemp(prefix="xlocal-private-"))
    parent.chmod(0o755)
    old = os.umask(0o022)
    yield parent
    os.umask(old)
    shutil.rmtree(parent, ignore_errors=True)


def test_local_launch_leaves_only_private_files(open_parent: Path, tmp_path: Path) -> None:
    home = open_parent / "xcore-home"
    script = write_script(tmp_path / "launch.py", """
with xm.create_experiment("private") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", "print('hello')"])])
    e.add(xm.Job(exe, xlocal.Local(), env_vars={"WANDB_API_KEY": "k-123"}))
""")
    env = {"XCORE_HOME": str(home)}
    assert run_xcore("launch", str(script), env=env).returncode == 0
    assert run_xcore("wait", "1", "--timeout", "30", env=env).returncode == 0
    modes = {".": oct(stat.S_IMODE(home.stat().st_mode))}
    modes.update({str(p.relative_to(home)): oct(stat.S_IMODE(p.lstat().st_mode)) for p in home.rglob("*")})
    assert any(name.endswith(".log") for name in modes) and any("runs/" in name for name in modes), modes
    loose = {}
    for name, mode in modes.items():
        path = home / name if name != "." else home
        want = "0o700" if path.is_dir() else "0o600"
        if mode != want:
            loose[name] = mode
    assert loose == {}, f"too open: {loose}"
    if shutil.which("runuser") and os.geteuid() == 0:
        log = next(home.rglob("*.log"))
        assert log.read_text() == "hello\n"
        for path in (home / "xcore.db", log):  # nobody else can read them
            assert subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(path)], capture_output=True,
                                  check=False).returncode != 0, path
