"""Reading what a command imported, in a fresh interpreter: for the core's start-up tests
(tests/test_startup.py) and the plugins' (plugins/*/tests/test_*_startup.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

# The fake backend registered before the CLI starts (it has no entry point), with the installed
# plugins (FAKE_BACKEND) or alone (FAKE_ONLY: what the core itself imports, whatever is installed).
FAKE_BACKEND = "from xcore.testing import fake, plugin_host; plugin_host({'fake': fake}, entry_points=True)"
FAKE_ONLY = "from xcore.testing import fake, plugin_host; plugin_host({'fake': fake})"


def modules_after(argv: list[str], home: Path, prelude: str = "",
                  env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """Run ``xcore ARGV`` in a fresh interpreter (after ``prelude``, one line); the modules loaded
    when it ended, and its stdout."""
    code = textwrap.dedent(f"""
        import json, os, sys
        {prelude}
        from xcore.cli.main import main
        try:
            code = main({argv!r})
        except SystemExit as exc:
            code = exc.code
        with open(os.environ["MODULES_OUT"], "w") as f:
            json.dump(sorted(sys.modules), f)
        sys.exit(code)
    """)
    out = home / "modules.json"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, **(env or {}), "XCORE_HOME": str(home), "MODULES_OUT": str(out)})
    assert result.returncode == 0, result.stderr
    return set(json.loads(out.read_text())), result.stdout


def at_interpreter_start() -> set[str]:
    """What the interpreter loads before any xcore code (site, and e.g. setuptools' editable-install
    finders, which import typing): not the CLI's doing, so not counted against it."""
    code = "import json, sys; print(json.dumps(sorted(sys.modules)))"
    return set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                         timeout=60, check=True).stdout))


def offenders(modules: set[str], names: tuple[str, ...]) -> list[str]:
    modules = modules - at_interpreter_start()
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))
