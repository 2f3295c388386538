"""Helpers shared by the core tests (a module of its own: plugins have conftest.py files too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


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
