from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from xcore.plugins import reset_host

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def xcore_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own state root, config dir and plugin host."""
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
