"""xlocal's executors, executables, specs and handles as a launch builds them (moved from the
core's tests, which check the core's own classes the same way): made by ``xcore.plugin.define``
/ ``frozen`` they behave as attrs' classes, they are written without cattrs where their values
are plain, and building them tokenizes no builtin's signature."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from xlocal_helpers import core_test_module

import xcore as xm
import xlocal

pytestmark = pytest.mark.usefixtures("xcore_home")
checks = core_test_module("class_checks")  # tests/class_checks.py: the same checks as the core's


def test_plain_dump_is_byte_identical_to_cattrs_for_xlocals_classes():
    """Written without cattrs where every value is plain (the two samples that are not: taken by
    cattrs as before); the stored JSON is the same bytes either way."""
    from xlocal.executables import LocalContainer, LocalProcess
    from xlocal.executors import DockerOptions, LocalSpec
    from xlocal.handles import ContainerHandle, ProcessHandle

    args = xm.SequentialArgs.from_collection({"seed": 3, "name": "a b $x\n", "flag": True})
    plain_taken = checks.dumped_as_cattrs_dumps([
        xlocal.Local(),
        xlocal.Local(xm.JobRequirements(cpu=2, ram=3 * xm.GiB, location="here", replicas=2), max_parallel=2, cwd="/tmp",
                     inherit_env=False, kill_grace_secs=1.5, experimental_stream_output=True),
        xlocal.Local(docker_options=DockerOptions(ports={8080: 80}, volumes={"/a": "/b:ro"})),  # via cattrs
        LocalSpec(),
        LocalProcess(name="true", command=["/bin/true", "--x=é"], cwd=None),
        LocalProcess(name="p", command=["python3", "-m", "m"], cwd="/w", args=args, env_vars={"K": "v w"}),
        LocalContainer(name="c", image="img:1", entrypoint=None, image_id="sha256:ab"),
        ProcessHandle(run_dir="/r", index=4, log_path="/r/4.log"),
        ContainerHandle(container_id="c1", name="n", base_url="unix:///s", cancel_marker="/m", error="boom"),
    ])
    assert plain_taken.count("Local") == 2 and "LocalProcess" in plain_taken and "ProcessHandle" in plain_taken


def test_xlocal_classes_build_without_tokenizing_a_builtin_signature():
    """attrs reads each converter's signature; for a builtin (``converter=tuple``) that means
    tokenizing its text signature, compiling tokenize's patterns (~2 ms of every launch)."""
    code = textwrap.dedent("""
        import tokenize
        import xcore as xm
        import xlocal
        import xlocal.executables, xlocal.handles
        from xcore.model import bazel, executables, packagables
        xm.binary(xlocal.Local.Spec(), "/bin/true")
        assert tokenize._compile.cache_info().currsize == 0, "a builtin converter's signature was tokenized"
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
