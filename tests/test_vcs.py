"""The git state of a launch script's directory, and git not started where no repository can be."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from xcore.launch.vcs import git_state

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None and not os.environ.get("XCORE_REQUIRE_INFRA"), reason="git not installed")


@pytest.fixture
def counted_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``git`` first on PATH that logs each call, then runs the real git."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git-calls"
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{GIT}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name in [n for n in os.environ if n.startswith("GIT_")]:
        monkeypatch.delenv(name)
    return log


def _calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _repo(path: Path) -> str:
    path.mkdir(parents=True)
    run = [str(GIT), "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*run, "init", "-q"], check=True)
    (path / "f.txt").write_text("a")
    subprocess.run([*run, "add", "f.txt"], check=True)
    subprocess.run([*run, "commit", "-q", "-m", "c"], check=True)
    return subprocess.run([*run, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_outside_any_repository_git_is_not_started(tmp_path, counted_git, monkeypatch):
    monkeypatch.setenv("GIT_SSL_CAINFO", "/etc/ssl/certs/ca.pem")  # a git variable that names no repository
    outside = tmp_path / "plain" / "dir"
    outside.mkdir(parents=True)
    if subprocess.run([GIT, "-C", str(outside), "rev-parse", "HEAD"], capture_output=True).returncode == 0:
        pytest.skip("the temporary directory is inside a git repository")
    assert git_state(outside) is None
    assert _calls(counted_git) == 0


def test_in_a_repository_its_commit_and_dirty_flag(tmp_path, counted_git):
    repo = tmp_path / "repo"
    commit = _repo(repo)
    (repo / "sub").mkdir()
    state = git_state(repo / "sub")
    assert state is not None and (state.commit, state.dirty) == (commit, False)
    (repo / "f.txt").write_text("b")
    state = git_state(repo)
    assert state is not None and (state.commit, state.dirty) == (commit, True)
    assert _calls(counted_git) == 4


def test_a_variable_naming_a_repository_still_asks_git(tmp_path, counted_git, monkeypatch):
    repo = tmp_path / "repo"
    commit = _repo(repo)
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    state = git_state(outside)
    assert state is not None and state.commit == commit
    assert _calls(counted_git) >= 1


def test_inside_a_bare_repository_git_decides(tmp_path, counted_git):
    repo = tmp_path / "repo"
    commit = _repo(repo)
    bare = tmp_path / "bare.git"
    subprocess.run([GIT, "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    state = git_state(bare)
    assert state is not None and state.commit == commit  # as before: rev-parse answers there
    assert _calls(counted_git) >= 1
