"""Issue 29, the last mile of XManager compatibility: cancelled launches, ``xm.utils``,
executable names, architecture defaults and test doubles, each checked against XManager's
own definitions (read from its source; written here)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from xlocal_helpers import run_xcore

import xcore as xm
import xlocal
from xcore.model.status import CANCELLED_AT_LAUNCH, STOPPED_AT_LAUNCH

pytestmark = pytest.mark.usefixtures("xcore_home")  # the isolation the core's tests get from conftest

PY = sys.executable
TOUCH = "import sys; open(sys.argv[1], 'w').close()"


def touch_job(exe, marker: Path) -> xm.Job:
    return xm.Job(exe, xlocal.Local(), args=[str(marker)])


def shown(experiment_id: int) -> dict:
    result = run_xcore("show", str(experiment_id), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def unit_statuses(experiment_id: int) -> dict[int, str]:
    return {u["id"]: u["status"] for u in shown(experiment_id)["work_units"]}


# -- item 1: cancel() on what experiment.add returned ---------------------------------------


def _no_eager_batches(monkeypatch) -> None:
    """xlocal hands its first committed jobs to the runner at once, from the launcher's thread,
    so a job could be started before the script's next line cancels it: batches wait for the
    script here (as XManager's launches wait for the event loop), which makes the cancel land
    before any submission, every run."""
    monkeypatch.setenv("XCORE_BATCH_MAX_AGE", "600")


def test_cancelled_adds_never_run_and_the_block_ends_cleanly(tmp_path, caplog, monkeypatch):
    _no_eager_batches(monkeypatch)
    kept, cancelled, generated = tmp_path / "kept", tmp_path / "cancelled", tmp_path / "generated"
    with caplog.at_level(logging.WARNING, logger="xcore"):
        with xm.create_experiment("cancel") as experiment:
            [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", TOUCH])])
            experiment.add(touch_job(exe, kept))
            plain = experiment.add(touch_job(exe, cancelled))
            assert plain.cancel() is True
            assert plain.cancelled() and plain.done() and plain.cancel() is True

            async def generator(work_unit):
                await asyncio.sleep(60)
                work_unit.add(touch_job(exe, generated))

            gen = experiment.add(generator)
            assert gen.cancel() is True
    # no ExperimentUnitError: the block ended cleanly
    assert "Ignored 2 cancelled tasks" in caplog.text or "ignored 2 cancelled tasks" in caplog.text
    experiment.wait_until_complete(timeout=60)
    time.sleep(0.3)
    assert kept.exists() and not cancelled.exists() and not generated.exists()
    record = shown(experiment.experiment_id)
    assert record["launch_status"] == "LAUNCHED"
    assert {u["id"]: u["status"] for u in record["work_units"]} == {1: "COMPLETED", 2: "CANCELLED", 3: "CANCELLED"}
    assert all(j["message"] == CANCELLED_AT_LAUNCH for u in record["work_units"][1:] for j in u["jobs"])
    waited = run_xcore("wait", str(experiment.experiment_id))
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert "2 cancelled, 1 completed" in waited.stdout
    with pytest.raises(concurrent.futures.CancelledError):
        plain.result()


def test_cancelled_adds_in_an_async_script(tmp_path, monkeypatch):
    _no_eager_batches(monkeypatch)
    cancelled, generated = tmp_path / "cancelled", tmp_path / "generated"

    async def main():
        async with xm.create_experiment("cancel async") as experiment:
            [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", TOUCH])])
            plain = experiment.add(touch_job(exe, cancelled))
            assert plain.cancel() is True

            async def generator(work_unit):
                await asyncio.sleep(60)
                await work_unit.add(touch_job(exe, generated))

            gen = experiment.add(generator)
            await asyncio.sleep(0)  # the generator has started
            assert gen.cancel() is True
            with pytest.raises(asyncio.CancelledError):
                await plain
        return experiment

    started = time.monotonic()
    experiment = asyncio.run(main())
    assert time.monotonic() - started < 30
    time.sleep(0.3)
    assert not cancelled.exists() and not generated.exists()
    assert unit_statuses(experiment.experiment_id) == {1: "CANCELLED", 2: "CANCELLED"}
    assert run_xcore("wait", str(experiment.experiment_id)).returncode == 0


def test_a_cancelled_generator_stops_what_it_started_and_wait_still_sees_failures(tmp_path):
    with xm.create_experiment("cancel started") as experiment:
        [sleeper, fails] = experiment.package([
            xm.binary(xlocal.Local.Spec(), PY, args=["-c", "import time; time.sleep(60)"]),
            xm.binary(xlocal.Local.Spec(), PY, args=["-c", "raise SystemExit(3)"]),
        ])

        async def generator(work_unit):
            await work_unit.add(xm.Job(sleeper, xlocal.Local()))
            await asyncio.sleep(60)

        launch = experiment.add(generator)
        deadline = time.monotonic() + 20
        while not launch.unit.launched_jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert launch.unit.launched_jobs
        assert launch.cancel() is True
        experiment.add(xm.Job(fails, xlocal.Local()))
    record = shown(experiment.experiment_id)
    first = record["work_units"][0]
    assert first["status"] == "CANCELLED" and first["jobs"][0]["message"] == STOPPED_AT_LAUNCH
    waited = run_xcore("wait", str(experiment.experiment_id), timeout=120)
    assert waited.returncode != 0  # unit 2 failed; the cancelled unit alone would not fail the wait
    listed = [line.split()[0] for line in waited.stdout.splitlines()[1:]]
    assert listed == ["2/python:"], waited.stdout


# -- item 2: xm.utils ------------------------------------------------------------------------


@pytest.fixture
def launch_script(tmp_path):
    from xcore import paths

    script = tmp_path / "project" / "launch" / "launcher.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    paths.set_launch_script(script)
    yield script
    paths.set_launch_script(None)


def test_resolve_path_relative_to_launcher_as_xmanager(launch_script, tmp_path):
    utils = xm.utils
    here = os.path.realpath(launch_script.parent)
    assert utils.find_launch_script_path() == str(launch_script)
    assert utils.resolve_path_relative_to_launcher(".") == here
    assert utils.resolve_path_relative_to_launcher("..") == os.path.dirname(here)
    assert utils.resolve_path_relative_to_launcher("data/x.txt") == os.path.join(here, "data", "x.txt")
    assert utils.resolve_path_relative_to_launcher("/abs/./path") == "/abs/./path"  # absolute: as given
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "link").symlink_to(launch_script.parent, target_is_directory=True)
    assert utils.resolve_path_relative_to_launcher("link") == os.path.join(here, "link")  # realpath'd, as XManager


def test_resolve_path_relative_to_launcher_without_a_script_is_a_runtime_error():
    from xcore import paths

    assert paths.launch_script() is None  # pytest runs as `python -m pytest`
    with pytest.raises(RuntimeError, match="launch script"):
        xm.utils.resolve_path_relative_to_launcher("data")
    assert xm.utils.resolve_path_relative_to_launcher("/data") == "/data"


def test_resolve_path_relative_to_launcher_from_a_real_script(tmp_path):
    script = tmp_path / "sub" / "launch.py"
    script.parent.mkdir()
    script.write_text(
        "import json, xcore as xm\n"
        "print(json.dumps([xm.utils.resolve_path_relative_to_launcher('.'), xm.Dockerfile().dockerfile,"
        " xm.Dockerfile('ctx').dockerfile, xm.Dockerfile('ctx', 'other/Dockerfile.gpu').path]))\n")
    out = subprocess.run([PY, str(script)], capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    here = os.path.realpath(script.parent)
    assert json.loads(out) == [here, os.path.join(here, "Dockerfile"), os.path.join(here, "ctx", "Dockerfile"),
                               os.path.join(here, "ctx")]


def test_arg_escaper_as_xmanager():
    class Color(enum.Enum):
        RED = 1

    escape = xm.utils.ARG_ESCAPER
    assert escape("a b") == "'a b'" and escape("plain") == "plain" and escape(3) == "3"
    assert escape(xm.ShellSafeArg("$HOME")) == "$HOME"
    assert escape(Color.RED) == "RED"
    assert escape("it's") == "'it'\"'\"'s'"
    assert isinstance(xm.ShellSafeArg("x"), xm.utils.SpecialArg)
    assert xm.utils.trivial_kwargs_joiner("lr", "0.1") == "lr=0.1"
    assert xm.merge_args({"x": "a b"}).to_list(xm.utils.ARG_ESCAPER) == ["--x='a b'"]


def test_dockerfile_defaults_to_the_one_in_its_build_context(launch_script):
    here = str(launch_script.parent)
    assert xm.Dockerfile().dockerfile == os.path.join(here, "Dockerfile")
    assert xm.Dockerfile("ctx").dockerfile == os.path.join(here, "ctx", "Dockerfile")
    assert xm.dockerfile_container(xlocal.Local.Spec()).executable_spec.dockerfile == os.path.join(here, "Dockerfile")
    assert xm.Dockerfile("/abs/ctx").dockerfile == "/abs/ctx/Dockerfile"


# -- item 3: executable names -----------------------------------------------------------------

# XManager's ``name_from_path`` (xm/executables.py): re.sub('\W', '_', basename(path.rstrip(sep))),
# applied to Binary.path, Container.image_path, BazelBinary/BazelContainer.label and the
# (resolved) path of PythonContainer and Dockerfile. Values as XManager 0.8.5 computes them.
XM_NAMES = {
    "image.tar": "image_tar",
    "./my-tool.sh": "my_tool_sh",
    "//path/to:train": "to_train",
    ":binary": "_binary",
    "gcr.io/p/img:v1": "img_v1",
    "python3.11": "python3_11",
    "/usr/bin/env": "env",
    "dir/": "dir",
}


@pytest.mark.parametrize(("path", "name"), XM_NAMES.items())
def test_executable_names_are_xmanagers(path, name):
    from xcore.model.executables import name_from_path

    assert name_from_path(path) == name
    assert xm.Container(path).name == name
    assert xm.BazelBinary(path).name == name and xm.BazelContainer(path).name == name
    if not path.startswith(("//", ":")):
        assert xm.Binary(path).name == name


def test_project_and_dockerfile_names_are_xmanagers(tmp_path):
    project = tmp_path / "my-project.v2"
    assert xm.PythonContainer(xm.ModuleName("m"), path=str(project)).name == "my_project_v2"
    assert xm.Dockerfile(str(project)).name == "my_project_v2"


def test_job_names_come_from_xmanagers_executable_names(tmp_path):
    tool = tmp_path / "my-tool.sh"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    with xm.create_experiment("names") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), str(tool))])
        assert exe.name == "my_tool_sh"
        unit = experiment.add(xm.Job(exe, xlocal.Local())).result()
    assert unit.job_names == ("my_tool_sh",)
    experiment.wait_until_complete(timeout=60)
    assert unit_statuses(experiment.experiment_id) == {1: "COMPLETED"}


# -- item 4: architecture defaults ------------------------------------------------------------

# XManager's ResourceType.architecture() (xm/resources.py, 0.8.5): ARM for the Grace hosts,
# HASWELL (x86) for every other GPU and TPU; no mapping for CPU, memory, disk and LOCAL_GPU.
XM_ARM = {"GB200", "GB300", "VR200"}
XM_HASWELL = {"TPU_V2", "TPU_V3", "TPU_V4", "TPU_V5E", "TPU_V5P", "TPU_V6E", "TPU_V7X", "P4", "T4", "L4_24TH",
              "P100", "V100", "A100", "A100_80GIB", "H100", "H100_MEGA", "H200", "B200", "B40_48TH", "B300"}


def test_architecture_table_is_xmanagers():
    for name in XM_ARM:
        assert xm.ResourceType[name].architecture() is xm.Architecture.ARM
    for name in XM_HASWELL:
        assert xm.ResourceType[name].architecture() is xm.Architecture.HASWELL
    for name in ("CPU", "MEMORY", "EPHEMERAL_STORAGE", "LOCAL_GPU"):
        with pytest.raises(ValueError, match="No Architecture"):
            xm.ResourceType[name].architecture()


def test_architecture_defaults_from_the_accelerator():
    assert xm.JobRequirements(tpu_v3=8).architecture is xm.Architecture.HASWELL
    assert xm.JobRequirements(tpu_v4="2x2x1").architecture is xm.Architecture.HASWELL
    assert xm.JobRequirements(a100=2).architecture is xm.Architecture.HASWELL
    assert xm.JobRequirements(gb200=4).architecture is xm.Architecture.ARM
    assert xm.JobRequirements(cpu=4).architecture is None
    assert xm.JobRequirements(local_gpu=1).architecture is None
    assert xm.JobRequirements(cpu=4, architecture=xm.Architecture.ARM).architecture is xm.Architecture.ARM
    assert xm.JobRequirements(gb200=1, architecture=xm.Architecture.ARM).architecture is xm.Architecture.ARM


def test_an_accelerator_on_the_wrong_architecture_is_refused():
    with pytest.raises(ValueError, match="P100 requires architecture Architecture.HASWELL, but Architecture.ARM"):
        xm.JobRequirements(p100=1, architecture=xm.Architecture.ARM)
    with pytest.raises(ValueError, match="GB200 requires architecture Architecture.ARM"):
        xm.JobRequirements(gb200=1, architecture=xm.Architecture.HASWELL)


def test_merged_requirements_keep_a_consistent_architecture():
    merged = xm.JobRequirements(a100=1).merge(xm.JobRequirements(gb200=2))
    assert merged.accelerator is xm.ResourceType.GB200 and merged.architecture is xm.Architecture.ARM


# -- item 5: test doubles ---------------------------------------------------------------------


def test_jobs_of_mocks_as_xmanagers_tests_build_them():
    from unittest import mock

    job = xm.Job(executable=mock.Mock(), executor=mock.Mock(), args={"a": 1}, name="name")
    assert job.args.to_list(str) == ["--a=1"]
    group = xm.JobGroup(learner=job, actor=xm.Job(mock.Mock(), mock.Mock()))
    assert xm.get_args_for_all_jobs(group, {"x": 1}) == {"learner": {"args": {"x": 1}}, "actor": {"args": {"x": 1}}}


def test_adding_a_job_of_mocks_is_a_clear_error():
    from unittest import mock

    with xm.create_experiment("mock") as experiment:
        with pytest.raises(TypeError, match="packaged Executable"):
            experiment.add(xm.Job(mock.Mock(), xlocal.Local()))


def test_unpackaged_specs_are_still_refused_at_once():
    with pytest.raises(TypeError, match="Package it first"):
        xm.Job(xm.Binary("/bin/true"), xlocal.Local())
    with pytest.raises(TypeError, match="Executor such as"):
        xm.Job(xm.Executable(name="x"), xlocal.Local.Spec())


def test_dm_tree_maps_over_sequential_args_and_jobs():
    tree = pytest.importorskip("tree", reason="dm-tree is not installed (xcore-core[test] has it)")
    args = xm.merge_args(["pos", 3], {"lr": 0.1, "layers": [1, 2]}, ["--", 7])
    assert tree.map_structure(lambda v: v, args).to_list(str) == args.to_list(str)
    doubled = tree.map_structure(lambda v: v * 2 if type(v) in (int, float) else v, args)
    assert doubled.to_list(str) == ["pos", "6", "--lr=0.2", "--layers=2", "--layers=4", "--", "14"]
    assert isinstance(doubled, xm.SequentialArgs)
    assert set(tree.flatten(args)) >= {"pos", 3, 0.1, 1, 2, "--", 7}
    job = xm.Job(xm.Executable(name="x"), xlocal.Local(), args={"n": 1})
    copied = tree.map_structure(lambda v: v, job)
    assert isinstance(copied, xm.Job) and copied.args.to_list(str) == ["--n=1"]


# -- the same tables, against XManager itself where it is installed ---------------------------


def test_names_architectures_and_escaper_match_an_installed_xmanager():
    xmanager = pytest.importorskip("xmanager.xm", reason="XManager is not installed here")
    from xmanager.xm import executables as xm_executables
    from xmanager.xm import utils as xm_utils

    from xcore.model.executables import name_from_path

    for path in [*XM_NAMES, "a b/c-d.e", "img@sha256:ab12", "//:image.tar"]:
        assert name_from_path(path) == xm_executables.name_from_path(path), path
    for member in xmanager.ResourceType:
        ours = xm.ResourceType[member.name]
        try:
            expected = member.architecture().name
        except ValueError:
            expected = None
        try:
            got = ours.architecture().name
        except ValueError:
            got = None
        assert got == expected, member.name
    for value in ["a b", "$x", 3, 0.5, True, "it's", ""]:
        assert xm.utils.ARG_ESCAPER(value) == xm_utils.ARG_ESCAPER(value)
    assert xm.utils.ARG_ESCAPER(xm.ShellSafeArg("$H")) == xm_utils.ARG_ESCAPER(xm_utils.ShellSafeArg("$H"))


# -- xcore port: the names above ----------------------------------------------------------------


def test_port_maps_xm_utils_and_lxm3s_ucl_presets():
    pytest.importorskip("libcst", reason="libcst is not installed (xcore-core[port] or [test])")
    from xcore.cli.port import port_source

    result = port_source(
        "from xmanager import xm\n"
        "from xmanager.xm import utils\n"
        "from xmanager.xm.utils import resolve_path_relative_to_launcher, ARG_ESCAPER\n"
        "from lxm3.contrib import ucl\n"
        "p = xm.utils.resolve_path_relative_to_launcher('.')\n")
    assert result.code.splitlines()[:4] == [
        "import xcore as xm",
        "from xcore import utils",
        "from xcore.model.utils import resolve_path_relative_to_launcher, ARG_ESCAPER",
        "from xhpc.xm_cluster import ucl",
    ]
    assert result.unmapped == []
