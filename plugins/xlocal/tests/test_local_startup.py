"""A plain local launch imports nothing it does not need (moved from the core's
tests/test_startup.py, which checks the core's part on the fake backend)."""

from __future__ import annotations

import textwrap

import pytest
from xlocal_helpers import core_test_module

pytestmark = pytest.mark.usefixtures("xcore_home")
checks = core_test_module("startup_checks")  # tests/startup_checks.py: the core's start-up helpers


def test_a_plain_local_launch_imports_no_asyncio_nor_archive_modules(tmp_path):
    """`xcore launch --wait` of a plain (not async) local sweep: none of the modules it used
    to import for nothing (asyncio with ssl, shutil with bz2 and lzma, tempfile, difflib)."""
    script = tmp_path / "sweep.py"
    script.write_text(textwrap.dedent("""
        import xcore as xm
        import xlocal
        with xm.create_experiment("plain") as experiment:
            [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), "/bin/true")])
            for i in range(2):
                experiment.add(xm.Job(exe, xlocal.Local(), args={"seed": i}))
    """))
    modules, _ = checks.modules_after(["launch", "--wait", str(script)], tmp_path)
    assert checks.offenders(modules, ("asyncio", "ssl", "shutil", "bz2", "lzma", "tempfile", "difflib")) == []
    # The executor, executable and handles are plain: written without cattrs (hooks/serialization.py).
    assert checks.offenders(modules, ("cattrs",)) == []
