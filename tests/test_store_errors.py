"""A store that cannot be used stops every command with one line saying what to do; the
file is never replaced. Each case goes through the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core_helpers import run_xcore, write_script
from xcore.testing import require_service

COMMANDS = (("list",), ("show", "1"), ("launch", "LAUNCH"))


def _script(tmp_path: Path) -> Path:
    return write_script(tmp_path / "launch.py", """
with xm.create_experiment("x") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", "pass"])])
    e.add(xm.Job(exe, xlocal.Local()))
""")


def _assert_clear_errors(tmp_path: Path, home: Path, *needles: str) -> None:
    script = str(_script(tmp_path))
    for command in COMMANDS:
        argv = [script if a == "LAUNCH" else a for a in command]
        result = run_xcore(*argv, env={"XCORE_HOME": str(home)}, timeout=60)
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        assert len(lines) == 1 and lines[0].startswith("error: "), (command, result.stderr)
        for needle in needles:
            assert needle in lines[0], (command, needle, lines[0])


def test_corrupt_store(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    junk = os.urandom(8192)
    (home / "xcore.db").write_bytes(junk)
    _assert_clear_errors(tmp_path, home, str(home / "xcore.db"), "corrupt", "mv ")
    assert (home / "xcore.db").read_bytes() == junk


def test_zero_byte_store_is_not_silently_an_empty_store(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "xcore.db").write_bytes(b"")
    _assert_clear_errors(tmp_path, home, str(home / "xcore.db"), "empty (0 bytes)")
    assert (home / "xcore.db").read_bytes() == b"", "the file must not be clobbered"


def test_xcore_home_is_a_file(tmp_path):
    home = tmp_path / "home"
    home.write_text("not a directory")
    _assert_clear_errors(tmp_path, home, str(home), "is a file")
    assert home.read_text() == "not a directory"


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@contextmanager
def _mounted(*argv: str, target: Path) -> Iterator[None]:
    subprocess.run(["mount", *argv, str(target)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", str(target)], check=False)


@contextmanager
def _read_only(directory: Path) -> Iterator[None]:
    with _mounted("--bind", str(directory), target=directory):
        subprocess.run(["mount", "-o", "remount,ro,bind", str(directory)], check=True)
        yield


def _make_store(tmp_path: Path, home: Path) -> None:
    result = run_xcore("launch", str(_script(tmp_path)), env={"XCORE_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert run_xcore("wait", "1", "--timeout", "30", env={"XCORE_HOME": str(home)}).returncode == 0


def test_read_only_store(tmp_path):
    require_service("root (mount)", _can_mount, "run the tests as root to mount a read-only file system")
    outer = tmp_path / "outer"
    home = outer / "home"
    home.mkdir(parents=True)
    _make_store(tmp_path, home)
    before = (home / "xcore.db").read_bytes()
    with _read_only(outer):
        _assert_clear_errors(tmp_path, home, str(home / "xcore.db"), "read-only")
    assert (home / "xcore.db").read_bytes() == before


def test_unwritable_place_for_a_new_store(tmp_path):
    require_service("root (mount)", _can_mount, "run the tests as root to mount a read-only file system")
    outer = tmp_path / "outer"
    outer.mkdir()
    with _read_only(outer):
        _assert_clear_errors(tmp_path, outer / "home", str(outer / "home"), "Read-only file system")


def test_full_disk(tmp_path):
    require_service("root (mount)", _can_mount, "run the tests as root to mount a small tmpfs")
    disk = tmp_path / "disk"
    disk.mkdir()
    with _mounted("-t", "tmpfs", "-o", "size=2m", "tmpfs", target=disk):
        home = disk / "home"
        _make_store(tmp_path, home)
        with open(disk / "filler", "wb") as filler:
            try:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
            except OSError:
                pass
        before = (home / "xcore.db").read_bytes()
        _assert_clear_errors(tmp_path, home, str(home / "xcore.db"), "full")
        assert (home / "xcore.db").read_bytes() == before
        (disk / "filler").unlink()
        assert run_xcore("list", env={"XCORE_HOME": str(home)}).returncode == 0, "usable again once space is freed"
