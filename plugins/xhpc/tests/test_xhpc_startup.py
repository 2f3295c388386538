"""xhpc costs the commands that do not use it nothing: its command is listed from metadata and
its classes are built only for its kinds (moved from the core's tests/test_startup.py, which
checks the same rules with a plugin made for the test)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _startup_checks():
    """tests/startup_checks.py of the repository: the core's own start-up helpers."""
    if "startup_checks" not in sys.modules:
        spec = importlib.util.spec_from_file_location("startup_checks", REPO / "tests" / "startup_checks.py")
        assert spec is not None and spec.loader is not None
        sys.modules["startup_checks"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["startup_checks"])
    return sys.modules["startup_checks"]


checks = _startup_checks()


def test_help_lists_cluster_from_metadata_without_importing_xhpc(tmp_path):
    modules, out = checks.modules_after(["--help"], tmp_path)
    assert "cluster" in out  # xhpc declares `cluster` in its xcore.commands entry points
    assert checks.offenders(modules, ("xhpc",)) == []


def test_cluster_command_runs_and_imports_xhpc(tmp_path):
    _, out = checks.modules_after(["cluster", "--help"], tmp_path)
    assert "list" in out and "check" in out


def test_another_backends_launch_builds_none_of_xhpcs_classes(tmp_path):
    """The tracker hook imports every plugin's hook module, but only the kinds used are
    registered: xhpc's executor, executable and handle classes (17 attrs classes) are not built
    for a launch on another backend (issue 14; here the fake one)."""
    script = tmp_path / "sweep.py"
    script.write_text(textwrap.dedent("""
        import xcore as xm
        from xcore.testing import fake
        with xm.create_experiment("plain") as experiment:
            [exe] = experiment.package([xm.binary(fake.FakeSpec(), "/bin/true")])
            for i in range(2):
                experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"seed": i}))
    """))
    modules, _ = checks.modules_after(["launch", "--wait", str(script)], tmp_path, prelude=checks.FAKE_BACKEND)
    assert "xhpc.hooks" in modules
    assert checks.offenders(modules, ("xhpc.executors", "xhpc.executables", "xhpc.handles")) == []
