"""docs/porting.md, checked against what xcore does (issue 29): the names in its tables exist, the
import rewrites it shows are what ``xcore port`` writes, and its argument and resource claims hold.
Core only (plus XManager itself where installed, to compare with); what needs xlocal is in
plugins/xlocal/tests/test_porting_doc_local.py."""

from __future__ import annotations

import enum
import importlib.util
import re
import types
from pathlib import Path

import pytest

import xcore as xm
from xcore.cli.port import _why_absent, port_source

DOC = (Path(__file__).resolve().parent.parent / "docs" / "porting.md").read_text()


def section(title: str) -> str:
    """The text under the heading that starts with ``title``, up to the next heading of any level."""
    start = DOC.index(f"\n{title}")
    following = re.search(r"\n#{2,3} ", DOC[start + 1:])
    return DOC[start:start + 1 + following.start()] if following else DOC[start:]


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the markdown tables in ``text``, as cells."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split(" | ")]
            for line in text.splitlines() if line.startswith("| ")]
    return [cells for cells in rows if not set(cells[0]) <= {"-", "|"}]


def spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


XM_SECTION = section("## XManager `xm` -> `xcore`")
XM_ROWS = table_rows(XM_SECTION)
NOT_IN_XCORE = {name for cells in XM_ROWS if cells[1] == "not in xcore" for name in spans(cells[0])}
UNIT_RUNS = {"`xm.KB` ... `xm.PB`": ["KB", "MB", "GB", "TB", "PB"],
             "`xm.KiB` ... `xm.PiB`": ["KiB", "MiB", "GiB", "TiB", "PiB"]}


def xm_names_in_table() -> set[str]:
    names = set()
    for cells in XM_ROWS:
        first = cells[0]
        for run, members in UNIT_RUNS.items():
            if run in first:
                names |= set(members)
        names |= {name.split("(")[0] for name in re.findall(r"`xm\.([A-Za-z_]\w*)", first)}
    return names


def test_every_xm_name_in_the_table_is_in_xcore_but_the_one_marked_absent():
    assert NOT_IN_XCORE == {"xm.framework_label"}
    missing = sorted(name for name in xm_names_in_table() if f"xm.{name}" not in NOT_IN_XCORE
                     and not hasattr(xm, name))
    assert missing == []
    assert not hasattr(xm, "framework_label")
    # and what the notes say xcore adds
    for added in ("python_module", "Sec", "Min", "Hr"):
        assert f"`xm.{added}`" in XM_SECTION and hasattr(xm, added)
    assert (xm.Sec, xm.Min, xm.Hr) == (1, 60, 3600)
    assert xm.core.get_xid_from_context() == -1  # "else -1"


def test_the_table_covers_xmanagers_public_names():
    xmanager_xm = pytest.importorskip("xmanager.xm", reason="XManager is not installed (scripts/test.sh installs it)")
    public = {name for name in dir(xmanager_xm) if not name.startswith("_")
              and not isinstance(getattr(xmanager_xm, name), types.ModuleType)}
    assert sorted(public - xm_names_in_table()) == []
    assert f"{len(public)} public names" in XM_SECTION.splitlines()[1]
    modules = {name for name in ("job_operators", "utils", "core") if f"`xm.{name}" in XM_SECTION}
    assert modules == {"job_operators", "utils", "core"}
    assert all(isinstance(getattr(xm, name), types.ModuleType) for name in modules)


def test_the_modules_have_the_names_the_table_lists():
    operators_row = next(cells for cells in XM_ROWS if cells[0] == "`xm.job_operators`")
    utils_row = next(cells for cells in XM_ROWS if cells[0] == "`xm.utils`")
    assert all(hasattr(xm.job_operators, name) for name in spans(operators_row[2]))
    listed = [name for name in spans(utils_row[2]) if re.fullmatch(r"\w+", name)]
    assert len(listed) == 7 and all(hasattr(xm.utils, name) for name in listed)


def test_the_accelerator_types_xcore_adds_are_the_ones_listed():
    row = next(cells for cells in XM_ROWS if "`xm.ResourceType`" in cells[0])
    listed = set(spans(row[2].split("a few more accelerator types")[1]))
    assert listed <= {member.name for member in xm.ResourceType}
    xmanager_xm = pytest.importorskip("xmanager.xm", reason="XManager is not installed (scripts/test.sh installs it)")
    assert listed == {m.name for m in xm.ResourceType} - {m.name for m in xmanager_xm.ResourceType}


def test_executable_names_are_the_examples_in_the_table():
    row = next(cells for cells in XM_ROWS if cells[0].startswith("executable names"))
    examples = re.findall(r"`([^`]+)` -> `([^`]+)`", row[2])
    assert len(examples) == 5
    for path, name in examples:
        assert xm.Container(path).name == name, path


# --- `xcore port`: the rewrite table at the top of the page -------------------------------------

PORT_ROWS = table_rows(DOC[:DOC.index("\n## XManager `xm`")])


def is_import(text: str) -> bool:
    return text.startswith(("from ", "import "))


def test_each_import_row_is_what_xcore_port_writes():
    checked = 0
    for before_cell, after_cell in PORT_ROWS:
        befores = [s for s in spans(before_cell) if is_import(s)]
        afters = [s for s in spans(after_cell) if is_import(s)]
        if not befores:
            continue
        if len(befores) > 1:  # "`A` / `B` | `A'` / `B'`": pairs
            pairs = [([before], [after]) for before, after in zip(befores, afters, strict=True)]
        else:  # one import, which may become several ("`A` + `B`")
            pairs = [(befores, afters)]
        for [before], after in pairs:
            assert port_source(before + "\n").code.splitlines() == after, before
            checked += 1
    assert checked == 11


def test_xm_local_cloud_names_move_to_their_plugins_as_the_table_says():
    checked = 0
    for before_cell, after_cell in PORT_ROWS:
        names = [s for s in spans(before_cell) if s.startswith("xm_local.")]
        if not names or is_import(spans(before_cell)[0]):
            continue
        targets = [s for s in spans(after_cell) if not is_import(s)]
        [added] = [s for s in spans(after_cell) if is_import(s)]
        for name, target in zip(names, targets, strict=True):
            for alias_import, alias in (("from xmanager import xm_local", "xm_local"),
                                        ("import xmanager.xm_local as xl", "xl")):  # "through any alias"
                source = f"{alias_import}\n{name.replace('xm_local', alias)}()\n"
                code = port_source(source).code.splitlines()
                assert code[1] == added and code[-1] == f"{target}()", (alias, code)
                checked += 1
    assert checked == 10


def test_what_port_lists_and_leaves_alone():
    result = port_source("from xmanager import xm_local, xm_abc\nfrom . import xm\nimport os\n"
                         "xm_local.Caip()\nxm_local.Kubernetes(cloud_provider='GKE')\n")
    assert {u.name for u in result.unmapped} >= {"xmanager.xm_abc", "xm_local.Caip",
                                                 "xm_local.Kubernetes(cloud_provider=...)"}
    assert "from . import xm\nimport os\n" in result.code  # relative imports and unrelated modules
    lxm3 = port_source("from lxm3 import xm_cluster\nxm_cluster.Config()\nxm_cluster.AppBundle\n")
    assert {u.name for u in lxm3.unmapped} >= {"xm_cluster.Config", "xm_cluster.AppBundle"}
    assert [u.name for u in port_source("from lxm3.contrib import other\n").unmapped] == ["lxm3.contrib.other"]
    assert port_source("from lxm3.contrib import ucl\n").unmapped == []  # the stub


def test_every_absent_module_in_the_contrib_table_has_its_reason_in_port():
    rows = table_rows(section("## `xmanager.contrib` and `xmanager.cloud`"))
    absent = [spans(cells[0])[0] for cells in rows if cells[1].startswith("absent")]
    assert len(absent) == 16
    for module in absent:
        assert _why_absent(module), module
        package, name = module.rsplit(".", 1)
        [unmapped] = port_source(f"from {package} import {name}\n").unmapped
        assert unmapped.reason.startswith("deliberately absent"), module


# --- Arguments ----------------------------------------------------------------------------------

def render(args) -> list[str]:
    return xm.SequentialArgs.from_collection(args).to_list(str)


class Color(enum.Enum):
    RED = 1


def test_arguments_render_as_the_page_says():
    assert render({"lr": 0.1}) == ["--lr=0.1"]
    assert render({"a": True, "b": False}) == ["--a", "--nob"]
    assert render({"c": [3, "4"]}) == ["--c=3", "--c=4"]
    assert render({"c": []}) == []
    assert render({"m": [[1, 2], 3]}) == ["--m=[[1, 2], 3]"]
    assert render({"n": None}) == []
    assert render({"e": Color.RED}) == ["--e=Color.RED"]
    merged = xm.merge_args(["p"], {"a": 1, "b": 2}, ["q"], {"a": 3})
    assert merged.to_list(str) == ["p", "--a=3", "--b=2", "q"]
    assert merged.to_dict() == {"p": True, "a": 3, "b": 2, "q": True}
    assert merged.remove_args("a") is not merged and merged.rewrite_args(lambda x: x) is not merged
    spaced = xm.SequentialArgs.from_collection({"s": "a b"})
    assert spaced.to_list() == ["--s='a b'"] and spaced.to_argv() == ["--s=a b"]
    with pytest.raises(ValueError):
        xm.SequentialArgs.from_collection("abc")
    with pytest.raises(TypeError):
        xm.SequentialArgs.from_collection("abc")


# --- Resources ----------------------------------------------------------------------------------

def test_resources_behave_as_the_page_says():
    R = xm.ResourceType
    assert xm.JobRequirements(RAM=1, Disk=2).task_requirements == xm.JobRequirements(
        memory=1, ephemeral_storage=2).task_requirements
    assert R["ram"] is R.MEMORY and R["disk"] is R.EPHEMERAL_STORAGE
    with pytest.raises(KeyError):
        xm.JobRequirements(cpus=1)
    for twice in ({"cpu": 1, "CPU": 2}, {"a100": 1, "v100": 1}):
        with pytest.raises(ValueError):
            xm.JobRequirements(**twice)
    tpu = xm.JobRequirements(tpu_v3="4x4")
    assert tpu.task_requirements[R.TPU_V3] == 16 and tpu.topology == xm.Topology("4x4")
    assert xm.JobRequirements(a100="8x2").replicas == 2
    assert xm.JobRequirements({"replicas": 3, "cpu": 1}).replicas == 3
    with pytest.raises(ValueError):
        xm.JobRequirements({"replicas": 3}, replicas=2)
    assert xm.JobRequirements().service_tier == xm.ServiceTier.PROD
    A = xm.Architecture
    for resource, arch in (("gb200", A.ARM), ("gb300", A.ARM), ("vr200", A.ARM), ("a100", A.HASWELL),
                           ("l4", A.HASWELL), ("tpu_v7", A.HASWELL), ("local_gpu", None)):
        assert xm.JobRequirements(**{resource: 1}).architecture == arch, resource
    assert xm.JobRequirements(cpu=1).architecture is None
    with pytest.raises(ValueError):
        xm.JobRequirements(p100=1, architecture=A.ARM)
    assert xm.ServiceTier["batch"] is xm.ServiceTier.BATCH
    assert xm.GpuType["a100"] is R.A100 and R.A100 in xm.GpuType and R.TPU_V3 in list(xm.TpuType)


def test_the_deliberate_resource_differences():
    assert xm.JobRequirements(memory="16GiB").task_requirements[xm.ResourceType.MEMORY] == 16 * 2**30
    for refused in ({"cpu": -1}, {"a100": 0.5}):
        with pytest.raises(ValueError):
            xm.JobRequirements(**refused)
    tpu = xm.JobRequirements(tpu_v3="4x4", service_tier=xm.ServiceTier.BATCH)
    merged = xm.JobRequirements(cpu=1).merge(tpu)
    assert merged.service_tier == xm.ServiceTier.BATCH and merged.topology == xm.Topology("4x4")


def test_errors_are_the_types_the_table_says():
    for name in ("ExperimentUnitError", "ExperimentUnitFailedError", "ExperimentUnitNotCompletedError",
                 "ReloadError"):
        assert issubclass(getattr(xm, name), RuntimeError), name
    assert issubclass(xm.NotFoundError, KeyError)
    assert issubclass(xm.DebugInterrupt, BaseException) and not issubclass(xm.DebugInterrupt, Exception)
    assert xm.ExperimentUnitError("m", work_unit=None).work_unit is None
    assert len(xm.JobGroup().jobs) == 0
    assert xm.Job(object(), object()).executable is not None  # takes anything


# --- Experiments and job generators -------------------------------------------------------------

def test_a_debug_interrupt_before_any_job_ends_that_unit_and_the_experiment_goes_on():
    """``DebugInterrupt`` "stops that unit": one raised before the generator added a job left the
    unit without jobs, so it (and the experiment) read LAUNCHING for good."""
    from xcore.testing import fake, plugin_host

    plugin_host({"fake": fake})
    with xm.create_experiment("debug") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])

        async def interrupted(work_unit):
            raise xm.DebugInterrupt()

        stopped = experiment.add(interrupted).result()
        experiment.add(xm.Job(exe, fake.FakeExecutor()))
    experiment.wait_until_complete(timeout=60)
    status = stopped.get_status()
    assert not status.is_active and "CANCEL" in str(status).upper(), status
    assert experiment.work_units[2].get_status().is_completed
    assert not experiment.get_status().is_active


def xmanager_package() -> Path:
    spec = importlib.util.find_spec("xmanager")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("XManager is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def test_every_xmanager_contrib_and_cloud_module_is_on_the_page():
    package = xmanager_package()
    text = section("## `xmanager.contrib` and `xmanager.cloud`")
    modules = [f"xmanager.{folder}.{path.stem}" for folder in ("contrib", "cloud")
               for path in sorted((package / folder).glob("*.py"))
               if path.stem != "__init__" and not path.stem.endswith("_test")]
    assert len(modules) >= 17
    for module in modules:
        assert f"| `{module}`" in text, module


def test_every_xm_local_name_is_in_the_xm_local_table():
    # XManager's xm_local loads its names lazily (its cloud clients need Google's libraries): read them
    symbols = re.findall(r'symbol="(\w+)"', (xmanager_package() / "xm_local" / "__init__.py").read_text())
    assert len(symbols) == 14
    text = section("## `xm_local` -> `xlocal`")
    for symbol in symbols:
        assert re.search(rf"`(xm_local\.)?{symbol}\b", text), symbol
