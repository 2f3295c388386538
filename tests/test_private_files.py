"""Everything xcore writes locally is private to the user: directories 0700, files 0600."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from core_helpers import run_xcore, run_xcore_fake, write_fake_script


@pytest.fixture
def open_parent():
    """A world-traversable parent (as a home directory usually is) and the common umask 022."""
    parent = Path(tempfile.mkdtemp(prefix="xcore-private-"))
    parent.chmod(0o755)
    old = os.umask(0o022)
    yield parent
    os.umask(old)
    shutil.rmtree(parent, ignore_errors=True)


def _modes(root: Path) -> dict[str, str]:
    found = {".": oct(stat.S_IMODE(root.stat().st_mode))}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = oct(stat.S_IMODE(path.lstat().st_mode))
    return found


def _nobody_can_read(path: Path) -> bool:
    result = subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(path)], capture_output=True, check=False)
    return result.returncode == 0


def test_a_launch_leaves_only_private_files(open_parent, tmp_path):
    """The store and a backend's state (the fake's job records and logs, written through the plugin
    API's helpers); xlocal's run directories: plugins/xlocal/tests/test_local_private_files.py."""
    home = open_parent / "xcore-home"
    script = write_fake_script(tmp_path / "launch.py", """
with xm.create_experiment("private") as e:
    [exe] = e.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", "print('hello')"])])
    e.add(xm.Job(exe, fake.FakeExecutor(), env_vars={"WANDB_API_KEY": "k-123"}))
""")
    env = {"XCORE_HOME": str(home)}
    assert run_xcore_fake("launch", str(script), env=env).returncode == 0
    assert run_xcore_fake("wait", "1", "--timeout", "30", env=env).returncode == 0
    modes = _modes(home)
    assert any(name.endswith(".log") for name in modes) and any("jobs/" in name for name in modes), modes
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
        assert not _nobody_can_read(home / "xcore.db")
        assert not _nobody_can_read(log)


def test_existing_too_open_home_made_by_xcore_is_tightened(open_parent):
    home = open_parent / "xcore-home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    db = sqlite3.connect(home / "xcore.db")  # as an older xcore left it: 0644 in a 0755 directory
    db.execute("PRAGMA user_version = 0")
    db.execute("CREATE TABLE t (x)")
    db.close()
    (home / "xcore.db").chmod(0o644)
    result = run_xcore("list", env={"XCORE_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert oct(stat.S_IMODE(home.stat().st_mode)) == "0o700"
    assert oct(stat.S_IMODE((home / "xcore.db").stat().st_mode)) == "0o600"


def test_a_directory_the_user_pointed_xcore_home_at_is_not_chmodded(open_parent):
    """XCORE_HOME=$HOME-like directories that xcore did not make keep their mode; its own files are private."""
    home = open_parent / "mine"
    home.mkdir()
    home.chmod(0o755)
    (home / "unrelated.txt").write_text("x")
    for _ in range(2):
        assert run_xcore("list", env={"XCORE_HOME": str(home)}).returncode == 0
        assert oct(stat.S_IMODE(home.stat().st_mode)) == "0o755"
    assert oct(stat.S_IMODE((home / "xcore.db").stat().st_mode)) == "0o600"


def test_image_build_log_and_digest_cache_are_private(open_parent):
    from xcore.images.build import _open_log
    from xcore.images.context import DigestCache

    cache = DigestCache(open_parent / "cache" / "xlocal-images" / "digests.json")
    cache._dirty = True
    cache.save()
    with _open_log(open_parent / "build.log") as log:
        log.write("RUN echo $TOKEN\n")
    assert oct(stat.S_IMODE((open_parent / "cache").stat().st_mode)) == "0o700"
    assert oct(stat.S_IMODE((open_parent / "cache" / "xlocal-images" / "digests.json").stat().st_mode)) == "0o600"
    assert oct(stat.S_IMODE((open_parent / "build.log").stat().st_mode)) == "0o600"


def test_store_wal_and_shm_files_are_private_while_open(open_parent, monkeypatch):
    monkeypatch.setenv("XCORE_HOME", str(open_parent / "home"))
    from xcore.store.sqlite import SqliteStore

    store = SqliteStore(open_parent / "home" / "xcore.db")
    store.create_experiment("t")
    try:
        found = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in (open_parent / "home").iterdir()}
        assert {"xcore.db", "xcore.db-wal", "xcore.db-shm"} <= set(found)
        assert set(found.values()) == {"0o600"}, found
    finally:
        store.close()
