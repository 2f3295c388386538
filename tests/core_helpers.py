"""Helpers shared by the core tests (a module of its own: plugins have conftest.py files too)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from xcore.hooks.host import reset_host

REPO = Path(__file__).resolve().parent.parent


def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The body of the ``xcore_home`` fixture (the core's tests, and the plugins' tests that moved
    out of them): own state root, config dir and plugin host, no plugin or store chosen by the caller."""
    home = tmp_path / "xcore-home"
    monkeypatch.setenv("XCORE_HOME", str(home))
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path / "xcore-config"))
    monkeypatch.delenv("XCORE_STORE", raising=False)
    monkeypatch.delenv("XCORE_PLUGINS", raising=False)
    monkeypatch.delenv("XCORE_DISABLE_PLUGINS", raising=False)
    monkeypatch.setenv("XCORE_QUIET", "1")
    reset_host()
    yield home
    reset_host()


def run_xcore(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a new process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})}, cwd=cwd,
    )


def write_script(path: Path, body: str) -> Path:
    path.write_text("import sys\nimport xcore as xm\nimport xlocal\n" + body)
    return path


# The fake backend has no entry point (it must never show in a user's `xcore plugins`), so a
# new process registers it before the CLI starts; installed plugins still load as usual.
_FAKE_CLI = ("import sys\n"
             "from xcore.testing import fake, plugin_host\n"
             "plugin_host({'fake': fake}, entry_points=True)\n"
             "from xcore.cli.main import main\n"
             "sys.exit(main(sys.argv[1:]))\n")


def run_xcore_fake(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                   timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``run_xcore`` with the fake backend (``xcore.testing.fake``) registered in the new process."""
    return subprocess.run(
        [sys.executable, "-c", _FAKE_CLI, *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})}, cwd=cwd,
    )


def write_fake_script(path: Path, body: str) -> Path:
    """A launch script for ``run_xcore_fake``: ``xm`` and ``fake`` (the fake backend) imported."""
    path.write_text("import sys\nimport xcore as xm\nfrom xcore.testing import fake\n" + body)
    return path


def start_xcore_fake(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``run_xcore_fake`` without waiting: the CLI in a new process, still running."""
    return subprocess.Popen([sys.executable, "-c", _FAKE_CLI, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
