"""The Vertex executor's fields, the machine table and the CustomJob bodies (no network)."""

from __future__ import annotations

import datetime

import pytest

import xcore as xm
import xgcp
from xcore.plugin import ConfigurationError, ResourceSpecError
from xcore.testing import make_request
from xgcp import build, config, machines


@pytest.mark.parametrize(("requirements", "machine", "accelerator"), [
    ({}, "n1-standard-4", None),
    ({"cpu": 2}, "n2-highcpu-2", None),
    ({"cpu": 8, "memory": "30GiB"}, "n1-standard-8", None),
    ({"cpu": 8, "memory": "31GiB"}, "n2-standard-8", None),
    ({"memory": "600GiB"}, "n2-highmem-80", None),
    ({"memory": "600GiB", "cpu": 90}, "n1-highmem-96", None),
    ({"t4": 1}, "n1-highmem-2", ("NVIDIA_TESLA_T4", 1)),
    ({"t4": 4, "cpu": 64}, "n1-highcpu-64", ("NVIDIA_TESLA_T4", 4)),
    ({"v100": 8}, "n1-highmem-2", ("NVIDIA_TESLA_V100", 8)),
    ({"a100": 1}, "a2-highgpu-1g", ("NVIDIA_TESLA_A100", 1)),
    ({"a100": 16}, "a2-megagpu-16g", ("NVIDIA_TESLA_A100", 16)),
    ({"a100_80gib": 4}, "a2-ultragpu-4g", ("NVIDIA_A100_80GB", 4)),
    ({"h100": 8}, "a3-highgpu-8g", ("NVIDIA_H100_80GB", 8)),
    ({"l4": 1, "cpu": 10}, "g2-standard-12", ("NVIDIA_L4", 1)),
    ({"l4": 4}, "g2-standard-48", ("NVIDIA_L4", 4)),
    ({"tpu_v3": 8}, "cloud-tpu", ("TPU_V3", 8)),
    ({"tpu_v5e": 8}, "ct5lp-hightpu-8t", ("TPU_V5_LITEPOD", 8)),
])
def test_smallest_machine_that_fits(requirements, machine, accelerator):
    chosen = machines.select_machine(xm.JobRequirements(**requirements))
    assert chosen.machine_type == machine
    assert (chosen.vertex_accelerator, chosen.accelerator_count) == (accelerator or (None, 0))


@pytest.mark.parametrize(("requirements", "message"), [
    ({"t4": 3}, "n1 machines take 1, 2, 4 T4 GPUs, not 3"),
    ({"a100": 3}, "carry 1 or 2 or 4 or 8 or 16 A100 accelerators, not 3"),
    ({"l4": 1, "cpu": 40}, "the largest (g2-standard-32) has 32 vCPUs"),
    ({"v100": 1, "cpu": 16}, "no machine with 1 V100 has 16 vCPUs"),
    ({"cpu": 200}, "Lower cpu or memory"),
    ({"gpu": 1}, "name the GPU type"),
    ({"tpu_v2": 4}, "carry 8 TPU_V2 accelerators, not 4"),
    ({"b300": 8}, "no machine with B300"),
])
def test_requirements_no_machine_fits_say_why(requirements, message):
    with pytest.raises(ResourceSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        xgcp.Vertex(requirements=xm.JobRequirements(**requirements))


@pytest.mark.parametrize(("fields", "message"), [
    ({"labels": {"Team": "x"}}, "lowercase"),
    ({"labels": {"xcore_store": "x"}}, "xcore's own"),
    ({"scheduling": "preemptible"}, "use one of standard, spot, flex-start"),
    ({"max_wait_secs": 60}, "flex-start. only"),
    ({"timeout_secs": 0}, "must be > 0"),
    ({"boot_disk_size_gb": 50}, "100 to 64000"),
    ({"boot_disk_type": "ssd"}, "pd-ssd"),
    ({"base_output_dir": "/tmp/out"}, "a gs:// path"),
    ({"network": "default"}, "projects/NUMBER/global/networks/NAME"),
    ({"service_account": "me"}, "an email"),
    ({"machine_type": "n9-huge"}, "not in xgcp's table"),
    ({"create_parallelism": 0}, "between 1 and 64"),
])
def test_bad_executor_fields_are_one_line_errors(fields, message):
    with pytest.raises(ConfigurationError, match=message):
        xgcp.Vertex(**fields)


def test_tensorboard_fields_are_checked():
    with pytest.raises(ConfigurationError, match="tensorboards/ID"):
        xgcp.TensorboardCapability(name="my-board", base_output_directory="gs://b/tb")


def test_executor_round_trips_through_the_store_serializer(xcore_home):
    from xgcp_testkit import host as core_host

    executor = xgcp.Vertex(requirements=xm.JobRequirements(a100=2), labels={"team": "ml"}, scheduling="flex-start",
                           max_wait_secs=600, tensorboard=xgcp.TensorboardCapability(
                               name="projects/p/locations/us-central1/tensorboards/1", base_output_directory="gs://b/tb"))
    host = core_host()
    assert host.serializer.load(host.serializer.dump(executor)) == executor


def _target(**defaults):
    return config.Target(name="t", project="p", location="europe-west4", service_account="sa@p.iam", defaults=defaults)


def test_tpu_job_body_with_topology_and_flex_start():
    exe = xgcp.VertexExecutable(name="train", image_uri="europe-docker.pkg.dev/p/r/train:1",
                                command=["python", "-m", "t"])
    executor = xgcp.Vertex(requirements=xm.JobRequirements(tpu_v5e=4), scheduling="flex-start", max_wait_secs=1800,
                           restart_job_on_worker_restart=True)
    body = build.custom_job([make_request(exe, executor, ["--steps", "10"])], _target(), "store1", "My Sweep!", "rid")
    [pool] = body["job_spec"]["worker_pool_specs"]
    assert pool["machine_spec"] == {"machine_type": "ct5lp-hightpu-4t", "accelerator_type": "TPU_V5_LITEPOD",
                                    "accelerator_count": 4, "tpu_topology": "2x2"}
    assert pool["container_spec"]["command"] == ["python", "-m", "t"]
    assert body["job_spec"]["scheduling"] == {"restart_job_on_worker_restart": True, "strategy": "FLEX_START",
                                              "max_wait_duration": datetime.timedelta(seconds=1800)}
    assert body["job_spec"]["service_account"] == "sa@p.iam"  # from the target
    assert body["display_name"].startswith("my-sweep--")
    assert body["labels"]["xcore_request"] == "rid" and body["labels"]["xcore_store"] == "store1"
    from xgcp import api

    api.message(body)  # the real message type accepts every field


def test_target_defaults_apply_when_the_executor_leaves_fields_unset():
    exe = xgcp.VertexExecutable(name="t", image_uri="img")
    target = _target(network="projects/1/global/networks/lab", labels={"team": "ml"})
    body = build.custom_job([make_request(exe, xgcp.Vertex(labels={"run": "a"}), [])], target, "s", "t", "r")
    assert body["job_spec"]["network"] == "projects/1/global/networks/lab"
    assert body["labels"]["team"] == "ml" and body["labels"]["run"] == "a"


def test_tensorboard_needs_a_service_account():
    exe = xgcp.VertexExecutable(name="t", image_uri="img")
    board = xgcp.TensorboardCapability(name="projects/p/locations/l/tensorboards/1", base_output_directory="gs://b/tb")
    target = config.Target(name="t", project="p")
    with pytest.raises(ConfigurationError, match="TensorBoard needs a service account"):
        build.custom_job([make_request(exe, xgcp.Vertex(tensorboard=board), [])], target, "s", "t", "r")
    body = build.custom_job([make_request(exe, xgcp.Vertex(tensorboard=board, service_account="a@b"), [])],
                            target, "s", "t", "r")
    assert body["job_spec"]["tensorboard"] == board.name
    assert body["job_spec"]["base_output_directory"] == {"output_uri_prefix": "gs://b/tb"}


def test_job_group_roles_place_pools_like_xmanager():
    exe = xgcp.VertexExecutable(name="t", image_uri="img")
    names = ["evaluator", "chief", "ps"]
    requests = [make_request(exe, xgcp.Vertex(timeout_secs=60 if n == "chief" else None), [], job_name=n)
                for n in names]
    assert build.pool_order(requests) == [3, 0, 2]
    body = build.custom_job(requests, config.Target(name="t", project="p"), "s", "t", "r")
    pools = body["job_spec"]["worker_pool_specs"]
    assert pools[1] == {} and pools[0]["machine_spec"]["machine_type"] == "n1-standard-4"
    assert body["job_spec"]["scheduling"]["timeout"].total_seconds() == 60  # job-wide fields: the chief's
    with pytest.raises(ConfigurationError, match="at most 4 worker pools"):
        build.pool_order([make_request(exe, xgcp.Vertex(), [], job_name=f"j{i}") for i in range(5)])
    # docs/gangs.md: each role learns which pool every role is (CLUSTER_SPEC names pools, not roles)
    for pool in (0, 2, 3):
        env = pools[pool]["container_spec"]["env"]
        assert env[0] == {"name": "XCORE_ROLE_POOLS",
                          "value": '{"evaluator":"workerpool3","chief":"workerpool0","ps":"workerpool2"}'}
    single = build.custom_job([make_request(exe, xgcp.Vertex(), [])], config.Target(name="t", project="p"), "s",
                              "t", "r")
    single_env = single["job_spec"]["worker_pool_specs"][0]["container_spec"]["env"]
    assert [e["name"] for e in single_env] == ["XCORE_ATTEMPT"]  # no roles to place: only the attempt


def test_targets_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("XGCP_TARGET", raising=False)
    (tmp_path / "vertex.toml").write_text(
        'default = "dev"\n[targets.dev]\nproject = "p1"\nlocation = "asia-east1"\nregistry = "r"\n'
        '[targets.dev.defaults]\nnetwork = "projects/1/global/networks/n"\n'
        '[targets.prod]\nproject = "p2"\n')
    assert config.resolve().project == "p1" and config.resolve().location == "asia-east1"
    assert config.resolve("prod").location == config.DEFAULT_LOCATION
    assert config.resolve(project="other").project == "other"
    with pytest.raises(ConfigurationError, match="'nope' is not in"):
        config.resolve("nope")
    (tmp_path / "vertex.toml").write_text('[targets.x]\nprojet = "typo"\n')
    with pytest.raises(ConfigurationError, match="unknown keys projet"):
        config.resolve()
    (tmp_path / "vertex.toml").write_text('[targets.x]\nproject = "p"\n[targets.x.defaults]\nscheduling = "spot"\n')
    with pytest.raises(ConfigurationError, match=r"\[targets.x.defaults\] has scheduling, which xgcp does not read; "
                                                 "defaults may set labels, network, service_account"):
        config.resolve()
    (tmp_path / "vertex.toml").write_text('[targets.x]\nproject = "p"\n[targets.x.defaults]\nlabels = { Team = "a" }\n')
    with pytest.raises(ConfigurationError, match=r"\[targets.x.defaults\] Vertex label Team='a': keys start"):
        config.resolve()


def test_no_project_anywhere_says_what_to_set(tmp_path, monkeypatch):
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path))
    for name in ("XGCP_TARGET", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="set GOOGLE_CLOUD_PROJECT"):
        config.resolve()


def test_python_module_packaging_explains_what_to_do(xcore_home):
    with pytest.raises(xm.PackagingError, match=r"xm.container\(xgcp.Vertex.Spec\(\)"), \
            xm.create_experiment("p") as experiment:
        experiment.package([xm.python_module(xgcp.Vertex.Spec(), "train", path=".")])


def test_package_answers_for_vertex_specs_and_others_get_the_cores_error(tmp_path):
    """The core asks xgcp only for its own executor spec; a spec no plugin owns gets the core's
    error (naming the spec), not xgcp's "cannot run"."""
    import attrs

    from xcore.hooks.host import PluginHost
    from xcore.testing import make_packaging_context
    from xgcp import hooks

    @attrs.frozen
    class OtherSpec(xm.ExecutorSpec):
        pass

    context = make_packaging_context(tmp_path)
    with pytest.raises(xm.PackagingError, match=r"No installed plugin can package 'xcore.Binary' for \S*OtherSpec"):
        PluginHost().package(xm.binary(OtherSpec(), "/bin/true"), context)
    with pytest.raises(xm.PackagingError, match="xgcp cannot run Binary"):
        hooks.VertexBackend().package(xm.binary(xgcp.Vertex.Spec(), "/bin/true"), context)
    made = hooks.VertexBackend().package(xm.container(xgcp.Vertex.Spec(), "us-docker.pkg.dev/p/r/img:1"), context)
    assert made is not None and (made.image_uri, made.command) == ("us-docker.pkg.dev/p/r/img:1", [])


@pytest.mark.parametrize(("requirements", "machine", "topology", "hosts", "accelerator"), [
    ({"tpu_v5e": 1}, "ct5lp-hightpu-1t", "1x1", 1, ("TPU_V5_LITEPOD", 1)),
    ({"tpu_v5e": "2x4"}, "ct5lp-hightpu-8t", "2x4", 1, ("TPU_V5_LITEPOD", 8)),  # one host when one fits
    ({"tpu_v5e": "4x4"}, "ct5lp-hightpu-4t", "4x4", 4, ("TPU_V5_LITEPOD", 4)),
    ({"tpu_v5e": 16}, "ct5lp-hightpu-4t", "4x4", 4, ("TPU_V5_LITEPOD", 4)),  # a chip count: the family's shape
    ({"tpu_v5e": "16x16", "replicas": 64}, "ct5lp-hightpu-4t", "16x16", 64, ("TPU_V5_LITEPOD", 4)),
    ({"tpu_v4": 4}, "ct4p-hightpu-4t", "2x2x1", 1, ("TPU_V4_POD", 4)),
    ({"tpu_v4": "2x2x2"}, "ct4p-hightpu-4t", "2x2x2", 2, ("TPU_V4_POD", 4)),
    ({"tpu_v5p": "4x4x4"}, "ct5p-hightpu-4t", "4x4x4", 16, None),  # no v5p enum in aiplatform_v1
    ({"tpu_v6e": "8x8"}, "ct6e-standard-4t", "8x8", 16, None),
])
def test_tpu_slices_become_one_pool_of_host_machines_one_replica_per_host(requirements, machine, topology, hosts,
                                                                         accelerator):
    from xgcp import api

    exe = xgcp.VertexExecutable(name="t", image_uri="img")
    executor = xgcp.Vertex(requirements=xm.JobRequirements(**requirements))
    body = build.custom_job([make_request(exe, executor, [])], _target(), "s", "t", "r")
    [pool] = body["job_spec"]["worker_pool_specs"]
    expected = {"machine_type": machine, "tpu_topology": topology}
    if accelerator:
        expected.update(accelerator_type=accelerator[0], accelerator_count=accelerator[1])
    assert pool["machine_spec"] == expected
    assert pool["replica_count"] == hosts
    parsed = api.message(body)  # the real message type takes every field
    assert parsed.job_spec.worker_pool_specs[0].machine_spec.tpu_topology == topology


@pytest.mark.parametrize(("requirements", "message"), [
    ({"tpu_v5e": "3x3"}, "Vertex runs TPU_V5E slices of 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16, not 3x3; "
                         "ask for one of those topologies."),
    ({"tpu_v4": "4x4"}, "Vertex runs TPU_V4 slices of 2x2x1, 2x2x2, 2x2x4"),
    ({"tpu_v5e": 12}, "Vertex runs TPU_V5E slices of 1, 4, 8, 16, 32, 64, 128, 256 chips, not 12; ask for one of "
                      "those counts or a topology such as tpu_v5e='1x1'."),
    ({"tpu_v5e": "4x4", "replicas": 2}, "Vertex runs a 4x4 TPU_V5E slice on 4 host(s), one replica each; leave "
                                        "replicas unset (or 4), not 2."),
    ({"tpu_v5e": "4x4", "num_slices": 2}, "Vertex custom jobs run one TPU slice (aiplatform_v1 has no multi-slice "
                                          "field), not num_slices=2: ask for one larger slice, or run Multislice on "
                                          "GKE with xk8s."),
    ({"tpu_v3": "4x4"}, "Vertex runs TPU_V3 as one 8-core host (tpu_v3=8), not 4x4 pod slices"),
    ({"tpu_v5e": 4, "cpu": 200}, "Vertex: a ct5lp-hightpu-4t TPU host has 112 vCPUs and 192 GiB, less than the 200 "
                                 "vCPUs and 0 GiB asked for; lower cpu or memory."),
    ({"tpu_v7": 8}, "Vertex has no machine with TPU_V7 accelerators"),
])
def test_tpu_shapes_vertex_cannot_run_are_one_line_errors(requirements, message):
    import re

    with pytest.raises(ResourceSpecError, match=re.escape(message)):
        xgcp.Vertex(requirements=xm.JobRequirements(**requirements))


@pytest.mark.parametrize(("gpus", "machine", "others"), [("8x2", "a3-highgpu-8g", 1), ("8x4", "a3-highgpu-8g", 3)])
def test_multi_host_gpus_put_the_other_hosts_in_worker_pool_1(gpus, machine, others):
    from xgcp import api

    exe = xgcp.VertexExecutable(name="t", image_uri="img")
    executor = xgcp.Vertex(requirements=xm.JobRequirements(h100=gpus))
    body = build.custom_job([make_request(exe, executor, ["--x"])], _target(), "s", "t", "r")
    chief, workers = body["job_spec"]["worker_pool_specs"]
    assert chief["replica_count"] == 1 and workers["replica_count"] == others
    for pool in (chief, workers):
        assert pool["machine_spec"] == {"machine_type": machine, "accelerator_type": "NVIDIA_H100_80GB",
                                        "accelerator_count": 8}
        assert pool["container_spec"]["args"] == ["--x"]
    api.message(body)


def test_a_multi_host_gpu_chief_next_to_a_worker_job_is_a_clear_error():
    exe = xgcp.VertexExecutable(name="t", image_uri="img")
    requests = [make_request(exe, xgcp.Vertex(requirements=xm.JobRequirements(h100="8x2")), [], job_name="chief"),
                make_request(exe, xgcp.Vertex(), [], job_name="worker")]
    with pytest.raises(ConfigurationError, match="multi-host GPU chief .2 hosts. fills Vertex worker pools 0 and 1"):
        build.custom_job(requests, _target(), "s", "t", "r")


def test_vertex_takes_xm_locals_positions():
    """XManager's ``xm_local.Vertex(requirements, tensorboard)`` takes both by position (attrs
    fields); a ported script that does (docs/porting.md) must build the same executor."""
    board = xgcp.TensorboardCapability("projects/p/locations/l/tensorboards/1", "gs://b/logs")
    vertex = xgcp.Vertex(xm.JobRequirements(t4=1), board)
    assert vertex.requirements == xm.JobRequirements(t4=1) and vertex.tensorboard is board
    assert xgcp.Vertex({"cpu": 2}).requirements == xm.JobRequirements(cpu=2)
    with pytest.raises(TypeError):
        xgcp.Vertex(xm.JobRequirements(), None, "target")  # the rest are keyword-only
