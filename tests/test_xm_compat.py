"""XManager's public ``xm`` API, as its documentation and docstrings describe it, on xcore.

Each test states one documented behaviour in our own words; no service is needed.
"""

from __future__ import annotations

import asyncio
import enum

import pytest

import xcore as xm
from xcore.model import job_operators

# The 75 public names of XManager's ``xm`` package (0.8.x): classes, helpers, units, modules.
XM_NAMES = [
    "AcceleratorType", "Architecture", "AuxiliaryUnit", "AuxiliaryUnitJob", "AuxiliaryUnitRole", "BazelBinary",
    "BazelContainer", "Binary", "BinaryDependency", "CommandList", "Constraint", "Container",
    "ContextAnnotations", "DebugInterrupt", "Dockerfile", "Executable", "ExecutableSpec", "Executor",
    "ExecutorSpec", "Experiment", "ExperimentUnit", "ExperimentUnitError", "ExperimentUnitFailedError",
    "ExperimentUnitNotCompletedError", "ExperimentUnitRole", "ExperimentUnitStatus", "GB", "GiB", "GpuType",
    "Importance", "InvalidTpuTopologyError", "Job", "JobConfig", "JobGeneratorType", "JobGroup",
    "JobRequirements", "JobType", "KB", "KiB", "LaunchedJob", "MB", "MetadataContext", "MiB", "ModuleName",
    "NotFoundError", "PB", "Packageable", "PiB", "PythonContainer", "ReloadError", "ResourceDict",
    "ResourceQuantity", "ResourceType", "SequentialArgs", "ServiceTier", "ShellSafeArg", "TB", "TiB",
    "Topology", "TpuType", "UserArgs", "WorkUnit", "WorkUnitCompletedAwaitable", "WorkUnitRole", "bazel_binary",
    "bazel_container", "binary", "container", "dockerfile_container", "get_args_for_all_jobs", "job_operators",
    "merge_args", "python_container", "run_in_asyncio_loop", "vCPU",
]


def test_every_public_xm_name_exists():
    assert len(XM_NAMES) == 75
    missing = [name for name in XM_NAMES if not hasattr(xm, name)]
    assert missing == []
    assert set(XM_NAMES) <= set(dir(xm))


# -- arguments -------------------------------------------------------------------------------


def test_a_flat_list_value_repeats_the_flag():
    args = xm.SequentialArgs.from_collection({"c": [3, "4"], "t": (1,)})
    assert args.to_list(str) == ["--c=3", "--c=4", "--t=1"]


def test_a_nested_list_is_passed_as_one_flag():
    assert xm.SequentialArgs.from_collection({"m": [[1, 2], 3]}).to_list(str) == ["--m=[[1, 2], 3]"]


def test_an_empty_list_gives_no_flag():
    assert xm.SequentialArgs.from_collection({"e": [], "k": 1}).to_list(str) == ["--k=1"]


def test_none_leaves_the_flag_out_and_the_string_None_passes(capsys):
    args = xm.merge_args({"skip": None, "keep": "None"})
    assert args.to_list(str) == ["--keep=None"]
    assert "skip" in capsys.readouterr().err  # a one-time warning says how to pass the text


def test_booleans_render_absl_style():
    assert xm.merge_args({"fast": True, "slow": False}).to_list(str) == ["--fast", "--noslow"]


def test_to_list_shell_quotes_by_default_but_not_shell_safe_args():
    args = xm.merge_args(["a b", xm.ShellSafeArg("$HOME")], {"name": "x y"})
    assert args.to_list() == ["'a b'", "$HOME", "--name='x y'"]
    assert args.to_argv() == ["a b", "$HOME", "--name=x y"]  # what a job receives: argv, unquoted
    with pytest.raises(RuntimeError):
        str(xm.ShellSafeArg("$HOME"))


def test_enum_values_render_by_name():
    class Mode(enum.Enum):
        FAST = 1

    assert xm.merge_args({"mode": Mode.FAST}).to_list() == ["--mode=FAST"]


def test_merge_args_overrides_keywords_in_place_and_appends_positionals():
    merged = xm.merge_args({"foo": "1", "bar": "42"}, ["--"], {"foo": "2"})
    assert merged.to_list(str) == ["--foo=2", "--bar=42", "--"]


def test_to_dict_is_always_a_dict_with_positionals_mapping_to_true():
    assert xm.merge_args(["--knob"], {1: False}).to_dict() == {"--knob": True, "1": False}
    assert xm.merge_args(["pos"], {"k": 2}).to_dict(kwargs_only=True) == {"k": 2}


def test_a_bare_string_is_a_value_error_that_suggests_a_list():
    with pytest.raises(ValueError, match=r"\['--flag'\]"):
        xm.SequentialArgs.from_collection("--flag")


def test_remove_args_drops_a_keyword_or_equal_positionals():
    args = xm.merge_args(["--debug", "x"], {"lr": 0.1, "seed": 3})
    assert args.remove_args("lr").to_list(str) == ["--debug", "x", "--seed=3"]
    assert args.remove_args("--debug").to_list(str) == ["x", "--lr=0.1", "--seed=3"]
    assert args.to_list(str) == ["--debug", "x", "--lr=0.1", "--seed=3"]  # the original is unchanged


def test_rewrite_args_touches_only_strings():
    args = xm.merge_args(["in/%s"], {"out": "o/%s", "n": 3}).rewrite_args(lambda s: s.replace("%s", "7"))
    assert args.to_list(str) == ["in/7", "--out=o/7", "--n=3"]


def test_sequential_args_compare_by_content():
    assert xm.merge_args({"a": 1}, ["b"]) == xm.merge_args({"a": 1}, ["b"])
    assert xm.merge_args({"a": 1}) != xm.merge_args({"a": 2})


def test_get_args_for_all_jobs_nests_by_group_member(tmp_path):
    exe = xm.Executable(name="e")
    executor = _executor()
    group = xm.JobGroup(a=xm.Job(exe, executor), inner=xm.JobGroup(b=xm.Job(exe, executor)))
    assert xm.get_args_for_all_jobs(group, {"lr": 1}) == {"a": {"args": {"lr": 1}}, "inner": {"b": {"args": {"lr": 1}}}}
    assert xm.get_args_for_all_jobs(xm.Job(exe, executor), {"lr": 1}) == {"args": {"lr": 1}}


# -- resources -------------------------------------------------------------------------------


def test_resource_type_lookup_is_case_insensitive_with_aliases():
    assert xm.ResourceType["cpu"] is xm.ResourceType.CPU
    assert xm.ResourceType["Ram"] is xm.ResourceType.MEMORY
    assert xm.ResourceType.DISK is xm.ResourceType.EPHEMERAL_STORAGE
    assert str(xm.ResourceType.V100) == "V100"


def test_unknown_resources_raise_key_error():
    with pytest.raises(KeyError):
        xm.ResourceType["warp_drive"]
    with pytest.raises(KeyError, match="Did you mean cpu"):
        xm.JobRequirements(cpus=2)


def test_ram_is_memory_in_job_requirements():
    req = xm.JobRequirements(ram=2 * xm.GiB)
    assert req.task_requirements[xm.ResourceType.MEMORY] == 2 * xm.GiB


def test_the_same_resource_twice_is_a_value_error():
    with pytest.raises(ValueError):
        xm.JobRequirements({"cpu": 1}, CPU=2)
    with pytest.raises(ValueError):
        xm.JobRequirements(memory=1, ram=1)


def test_two_accelerator_types_are_a_value_error():
    with pytest.raises(ValueError):
        xm.JobRequirements(v100=1, tpu_v3=8)


def test_replicas_can_come_in_the_resource_mapping_but_not_twice():
    assert xm.JobRequirements({"replicas": 3}, cpu=1).replicas == 3
    assert xm.JobRequirements(cpu=1).replicas == 1
    with pytest.raises(ValueError):
        xm.JobRequirements({"replicas": 2}, replicas=2)


def test_tpu_topology_strings_set_count_and_topology():
    req = xm.JobRequirements(tpu_v3="4x4")
    assert req.accelerator is xm.ResourceType.TPU_V3
    assert req.topology == xm.Topology("4x4") and req.topology.chip_count == 16
    assert req.task_requirements[xm.ResourceType.TPU_V3] == 16
    assert "tpu_v3=xm.Topology('4x4')" in repr(req)


def test_a_plain_accelerator_count_is_a_one_dimensional_topology():
    assert xm.JobRequirements(v100=8).topology == xm.Topology("8")


def test_a_multihost_gpu_topology_implies_replicas():
    req = xm.JobRequirements(a100="8x4")
    assert req.replicas == 4 and req.task_requirements[xm.ResourceType.A100] == 32
    with pytest.raises(ValueError):
        xm.JobRequirements(a100="8x4", replicas=2)


def test_a_topology_on_a_non_accelerator_is_refused():
    with pytest.raises(ValueError):
        xm.JobRequirements(cpu="2x2")


def test_invalid_topologies_raise_their_own_error():
    with pytest.raises(xm.InvalidTpuTopologyError):
        xm.Topology("4by4")
    assert xm.Topology("2x2x1_twisted").dimensions == [2, 2, 1]


def test_enum_subsets_compare_equal_to_resource_types():
    assert xm.ResourceType.A100 in xm.GpuType and xm.ResourceType.TPU_V4 in xm.TpuType
    assert xm.ResourceType.LOCAL_GPU not in xm.GpuType and xm.ResourceType.LOCAL_GPU in xm.AcceleratorType
    assert xm.GpuType.V100 is xm.ResourceType.V100 and xm.TpuType["tpu_v3"] is xm.ResourceType.TPU_V3
    assert xm.ResourceType.CPU not in xm.AcceleratorType
    with pytest.raises(ValueError):
        xm.GpuType(xm.ResourceType.TPU_V2.value)


def test_architecture_service_tier_and_location():
    req = xm.JobRequirements(cpu=1, architecture=xm.Architecture.ARM, location="cell-a")
    assert req.architecture is xm.Architecture.ARM and req.location == "cell-a"
    assert req.service_tier is xm.ServiceTier.PROD  # the default
    req.service_tier = xm.ServiceTier.BATCH
    assert req.service_tier is xm.ServiceTier.BATCH
    assert xm.ServiceTier["freebie"] is xm.ServiceTier.FREEBIE


def test_merge_lets_the_other_side_override():
    base = xm.JobRequirements(cpu=2, memory=4 * xm.GiB, v100=1, location="a")
    merged = base.merge(xm.JobRequirements(cpu=8, a100=2, replicas=3))
    assert merged.task_requirements[xm.ResourceType.CPU] == 8
    assert merged.task_requirements[xm.ResourceType.MEMORY] == 4 * xm.GiB
    assert merged.accelerator is xm.ResourceType.A100 and xm.ResourceType.V100 not in merged.task_requirements
    assert merged.location == "a" and merged.replicas == 3
    assert base.accelerator is xm.ResourceType.V100  # a new object; base is unchanged


def test_resource_dict_adds_and_scales():
    a = xm.JobRequirements(cpu=1, memory=2).task_requirements
    b = xm.JobRequirements(cpu=3).task_requirements
    assert dict(a + b) == {xm.ResourceType.CPU: 4, xm.ResourceType.MEMORY: 2}
    assert dict(2 * b) == {xm.ResourceType.CPU: 6}
    assert isinstance(a, xm.ResourceDict) and str(b) == "CPU: 3.0"


def test_job_requirements_round_trip_keeps_topology_tier_and_architecture():
    req = xm.JobRequirements(tpu_v4="2x2x2", service_tier=xm.ServiceTier.BATCH,
                             architecture=xm.Architecture.HASWELL, replicas=2)
    assert xm.JobRequirements.from_dict(req.to_dict()) == req


# -- job blocks, operators and helpers ---------------------------------------------------------


def _executor():
    from xcore.testing import fake

    return fake.FakeExecutor()


def test_an_empty_job_group_can_be_filled_later():
    group = xm.JobGroup()
    assert group.jobs == {} and group.constraints == []
    group.jobs["train"] = xm.Job(xm.Executable(name="t"), _executor())
    assert list(group.jobs) == ["train"]


def test_job_groups_carry_constraints():
    class SameMachine(xm.Constraint):
        pass

    group = xm.JobGroup(a=xm.Job(xm.Executable(name="a"), _executor()), constraints=[SameMachine()])
    [clique] = job_operators.aggregate_constraint_cliques(group)
    assert isinstance(clique.constraint, SameMachine) and [j.executable.name for j in clique.jobs] == ["a"]


def test_job_operators_name_copy_and_flatten():
    group = xm.JobGroup(learner=xm.Job(xm.Executable(name="l"), _executor()),
                        actors=xm.JobGroup(a1=xm.Job(xm.Executable(name="x"), _executor())))
    copy = job_operators.shallow_copy_job_type(group)
    job_operators.populate_job_names(copy)
    assert [j.name for j in job_operators.flatten_jobs(copy)] == ["learner", "actors_a1"]
    assert [j.name for j in job_operators.flatten_jobs(group)] == [None, None]  # the original keeps its names
    assert sorted(job_operators.get_jobs(copy)) == ["actors_a1", "learner"]


def test_run_in_asyncio_loop_makes_a_coroutine_function_synchronous():
    @xm.run_in_asyncio_loop
    async def add(a, b):
        await asyncio.sleep(0)
        return a + b

    assert add(2, 3) == 5


def test_errors_have_xmanager_types():
    assert issubclass(xm.ReloadError, xm.ExperimentUnitError)
    assert issubclass(xm.ExperimentUnitError, RuntimeError)
    assert issubclass(xm.NotFoundError, KeyError)
    assert issubclass(xm.DebugInterrupt, BaseException) and not issubclass(xm.DebugInterrupt, Exception)
    assert xm.ExperimentUnitError("x", work_unit=7).work_unit == 7


def test_launched_job_is_a_read_only_view():
    job = xm.LaunchedJob(name="train", address="123", logs="/tmp/log")
    assert (job.name, job.address, job.logs) == ("train", "123", "/tmp/log")


def test_get_xid_from_context_outside_any_experiment():
    assert xm.core.get_xid_from_context() == -1


def test_bazel_specs_and_packageables():
    spec = xm.BazelBinary(label="//path/to:train-main")
    assert spec.name == "to_train_main" and spec.bazel_args == () and spec.dependencies == ()  # XManager's name
    packageable = xm.bazel_binary(_executor().Spec(), "//a:b", bazel_args=["-c", "opt"], args={"x": 1})
    assert packageable.executable_spec == xm.BazelBinary("//a:b", (), ("-c", "opt"))
    assert packageable.args.to_list(str) == ["--x=1"]
    container = xm.bazel_container(_executor().Spec(), "//:image.tar")
    assert container.executable_spec.name == "_image_tar"  # XManager: basename of ":image.tar", \W -> _


def test_bazel_build_command_and_outputs_from_build_events():
    from xcore.model import bazel

    assert bazel.build_command(["//:a"], ["-c", "opt"], "/tmp/ev.json") == [
        "bazel", "build", "--build_event_json_file=/tmp/ev.json", "-c", "opt", "--", "//:a"]
    events = [
        '{"id": {"namedSet": {"id": "0"}}, "namedSetOfFiles": {"files": [{"name": "a", "uri": "file:///ws/bazel-out/bin/a"}]}}',
        '{"id": {"namedSet": {"id": "1"}}, "namedSetOfFiles": {"files": [], "fileSets": [{"id": "0"}]}}',
        ('{"id": {"targetCompleted": {"label": "//:a"}}, "completed": {"success": true, '
         '"outputGroup": [{"name": "default", "fileSets": [{"id": "1"}]}]}}'),
    ]
    assert bazel.outputs_from_events(events) == {"//:a": ["/ws/bazel-out/bin/a"]}


def test_bazel_without_a_workspace_says_what_to_do(tmp_path, monkeypatch):
    from xcore.errors import PackagingError
    from xcore.model import bazel

    monkeypatch.delenv("XCORE_BAZEL_WORKSPACE", raising=False)
    with pytest.raises(PackagingError, match="XCORE_BAZEL_WORKSPACE"):
        bazel.find_workspace(tmp_path)
