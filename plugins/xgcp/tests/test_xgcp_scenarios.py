"""End-to-end scenarios through the core, the real aiplatform_v1 REST client and the fake Vertex."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from xgcp_testkit import jobs, logs, states, wait, xcore_cli

import xcore as xm
import xgcp
from xcore.testing.contract import HOSTILE_ARGS, HOSTILE_ENV

Status = xm.Status

IMAGE = "fake.registry/job:1"
SCRIPT = ("import json, os, sys\n"
          "print('ARGS ' + json.dumps({'argv': sys.argv[1:], 'env': os.environ.get('HOSTILE')}), flush=True)\n"
          "sys.exit(int(os.environ.get('EXIT', '0')))\n")


def run_units(units: list[Any], executor: Any = None, title: str = "scenario") -> int:
    with xm.create_experiment(title) as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        for unit in units:
            if isinstance(unit, xm.JobGroup):
                experiment.add(unit)
            else:
                experiment.add(xm.Job(exe, executor or xgcp.Vertex(), args=unit.get("args", []),
                                      env_vars=unit.get("env", {})))
    return experiment.experiment_id


@pytest.fixture
def image(vertex: Any) -> str:
    vertex.add_image(IMAGE, [sys.executable, "-c", SCRIPT])
    return IMAGE


def test_single_job_body_and_outcome(vertex, xcore_home, image):
    executor = xgcp.Vertex(requirements=xm.JobRequirements(cpu=6, memory="20GiB"), labels={"team": "ml"},
                           service_account="trainer@p.iam.gserviceaccount.com", timeout_secs=3600,
                           scheduling="spot", boot_disk_size_gb=200, enable_web_access=True,
                           base_output_dir="gs://bucket/out")
    exp = run_units([{"args": ["--lr", "0.1"], "env": {"EXIT": "0"}}], executor)
    [job] = wait(exp)
    assert (job.status, job.exit_code) == (Status.COMPLETED, 0), job.message
    [created] = vertex.jobs.values()
    spec = created.job_spec
    [pool] = spec.worker_pool_specs
    assert pool.machine_spec.machine_type == "n1-standard-8"  # smallest with >= 6 vCPUs and 20 GiB
    assert list(pool.container_spec.args) == ["--lr", "0.1"]
    assert [(e.name, e.value) for e in pool.container_spec.env] == [("EXIT", "0"), ("XCORE_ATTEMPT", "1")]
    assert pool.disk_spec.boot_disk_size_gb == 200
    assert spec.scheduling.strategy.name == "SPOT" and spec.scheduling.timeout.total_seconds() == 3600
    assert spec.service_account == "trainer@p.iam.gserviceaccount.com" and spec.enable_web_access
    assert spec.base_output_directory.output_uri_prefix == "gs://bucket/out"
    assert created.labels["team"] == "ml" and created.labels["xcore_experiment"] == str(exp)
    assert job.log_path.startswith("https://console.cloud.google.com/vertex-ai/")


def test_job_group_becomes_worker_pools(vertex, xcore_home, image):
    with xm.create_experiment("group") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        experiment.add(xm.JobGroup(
            chief=xm.Job(exe, xgcp.Vertex(requirements=xm.JobRequirements(a100=1)), args=["chief"]),
            worker=xm.Job(exe, xgcp.Vertex(requirements=xm.JobRequirements(t4=2, replicas=2)), args=["worker"],
                          env_vars={"EXIT": "3"})))
    found = wait(experiment.experiment_id)
    assert vertex.calls["create"] == 1
    [created] = vertex.jobs.values()
    chief, worker = created.job_spec.worker_pool_specs
    assert (chief.machine_spec.machine_type, chief.machine_spec.accelerator_type.name, chief.replica_count) == (
        "a2-highgpu-1g", "NVIDIA_TESLA_A100", 1)
    assert (worker.machine_spec.accelerator_type.name, worker.machine_spec.accelerator_count,
            worker.replica_count) == ("NVIDIA_TESLA_T4", 2, 2)
    by_name = {j.name: j for j in found}
    assert len(by_name) == 2, [j.name for j in found]
    states = [(j.status.value, j.exit_code, j.message) for j in found]
    # the worker exited 3: its job reads exit code 3; the chief's reads Vertex's message
    assert ("FAILED", 3, "exit code 3") in states
    assert any(m.startswith("Vertex: failed: The replica workerpool1-") for _, _, m in states)


def test_job_group_with_too_many_chief_replicas_is_one_clear_failure(vertex, xcore_home, image):
    with pytest.raises(xm.ExperimentUnitError), xm.create_experiment("bad") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        experiment.add(xm.Job(exe, xgcp.Vertex(requirements=xm.JobRequirements(replicas=2))))
    [job] = jobs(experiment.experiment_id)
    assert job.status is Status.FAILED
    assert "first worker pool (the chief) runs 1 replica" in job.message
    assert vertex.calls["create"] == 0


def test_sweep_of_100_with_one_failure_and_status_in_one_list_call(vertex, xcore_home, image):
    vertex.auto_run = False
    exp = run_units([{"args": [f"--trial={i}"]} for i in range(100)])
    assert vertex.calls["create"] == 100 and len(vertex.jobs) == 100
    names = list(vertex.jobs)
    for i, name in enumerate(names):
        vertex.set_state(name, "RUNNING")
        if i == 41:
            vertex.set_state(name, "FAILED", "The replica workerpool0-0 exited with a non-zero status of 2.")
        else:
            vertex.set_state(name, "SUCCEEDED")
    before = vertex.calls["list"]
    result = xcore_cli("show", str(exp), "--json")
    assert vertex.calls["list"] - before == 1, "status of 100 trials must be one list call"
    assert vertex.calls["get"] == 0
    assert result.stdout, result.stderr
    found = wait(exp)
    statuses = [j.status for j in found]
    assert statuses.count(Status.COMPLETED) == 99
    [failed] = [j for j in found if j.status is Status.FAILED]
    assert (failed.exit_code, failed.message) == (2, "exit code 2")


def test_hostile_arguments_reach_the_container_spec_exactly(vertex, xcore_home, image):
    exp = run_units([{"args": HOSTILE_ARGS, "env": {"HOSTILE": HOSTILE_ENV}}])
    [job] = wait(exp)
    [created] = vertex.jobs.values()
    container = created.job_spec.worker_pool_specs[0].container_spec
    assert list(container.args) == HOSTILE_ARGS and not container.command
    # Vertex expands $(NAME) and $$ in env values: each $ is sent doubled, and arrives single.
    assert {e.name: e.value for e in container.env} == {"HOSTILE": HOSTILE_ENV.replace("$", "$$"),
                                                        "XCORE_ATTEMPT": "1"}
    output = "".join(logs(job))
    line = next(line for line in output.splitlines() if line.startswith("ARGS "))
    assert json.loads(line.removeprefix("ARGS ")) == {"argv": HOSTILE_ARGS, "env": HOSTILE_ENV}


DOLLARS = {"BASE": "base", "REF": "$(BASE)/x", "HOME_REF": "$(HOME)", "ESCAPED": "$$(BASE)", "PAIRS": "a$$b $$$",
           "OPEN": "$(BASE", "TRAILING": "cost 5$", "ATTEMPT": "$(XCORE_ATTEMPT)"}


def test_env_values_with_variable_references_reach_the_program_as_written(vertex, xcore_home, image):
    """Vertex replaces ``$(NAME)`` of a variable defined before it and reads ``$$`` as ``$`` in
    env values (its EnvVar reference, as Kubernetes does; the fake does the same): every value
    reaches the program byte for byte, and ``xcore retry`` reads the same values back."""
    names = sorted(DOLLARS)
    probe = f"import json, os; print('ENV ' + json.dumps({{k: os.environ.get(k) for k in {names!r}}}), flush=True)"
    vertex.add_image(IMAGE + "-env", [sys.executable, "-c", probe])
    with xm.create_experiment("dollars") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE + "-env")])
        experiment.add(xm.Job(exe, xgcp.Vertex(), env_vars=DOLLARS))
    exp = experiment.experiment_id
    [job] = wait(exp)
    line = next(line for line in "".join(logs(job)).splitlines() if line.startswith("ENV "))
    assert json.loads(line.removeprefix("ENV ")) == DOLLARS
    from xcore.hooks.host import get_host

    host = get_host()
    kept = host.job_env(job.handle_kind, host.serializer.load(job.handle))
    assert {k: kept[k] for k in DOLLARS} == DOLLARS


def test_quota_errors_mid_sweep_lose_nothing_and_duplicate_nothing(vertex, xcore_home, image):
    vertex.auto_run = False
    vertex.fail("create", 429, times=6, after=10)  # quota exhausted after 10 creates, for a while
    vertex.fail("create", 503, "backend unavailable", times=3, after=5, create_anyway=True)  # created, answer lost
    exp = run_units([{"args": [f"--trial={i}"]} for i in range(30)])
    units = [(j.work_unit_id, j.status) for j in jobs(exp)]
    assert len(units) == 30 and all(s is Status.PENDING for _, s in units), units
    assert len(vertex.jobs) == 30, "a create whose answer was lost must not be repeated"
    per_unit = sorted(int(j.labels["xcore_unit"]) for j in vertex.jobs.values())
    assert per_unit == list(range(1, 31))
    handles = {json.dumps(j.handle, sort_keys=True) for j in jobs(exp)}
    assert len(handles) == 30
    assert vertex.calls["create"] == 30 + 6 + 0  # each lost answer is found by a list, not created again


def test_persistent_quota_fails_only_the_units_it_hit(vertex, xcore_home, image, monkeypatch):
    from xgcp import api

    monkeypatch.setattr(api, "RETRY_BUDGET_SECS", 0.2)
    vertex.auto_run = False
    vertex.fail("create", 429, times=10_000, after=3)
    with pytest.raises(xm.ExperimentUnitError):
        run_units([{"args": [str(i)]} for i in range(5)], xgcp.Vertex(create_parallelism=1))
    found = jobs(1)
    assert [j.status for j in found].count(Status.PENDING) == 3 == len(vertex.jobs)
    failed = [j for j in found if j.status is Status.FAILED]
    assert len(failed) == 2
    assert all("quota exceeded" in j.message and "create_parallelism" in j.message for j in failed)


def test_permission_denied_and_disabled_api_say_what_to_run(vertex, xcore_home, image):
    vertex.fail("create", 403, "Permission 'aiplatform.customJobs.create' denied on resource", times=1)
    vertex.fail("create", 403, "Vertex AI API has not been used in project fake-project before or it is disabled.",
                times=1)
    with pytest.raises(xm.ExperimentUnitError):
        run_units([{"args": ["a"]}, {"args": ["b"]}], xgcp.Vertex(create_parallelism=1))
    disabled, denied = sorted((j.message for j in jobs(1)), key=lambda m: "gcloud services" not in m)
    assert disabled.endswith("run `gcloud services enable aiplatform.googleapis.com --project fake-project`.")
    assert "roles/aiplatform.user" in denied and "http://" not in denied
    assert not vertex.jobs


def test_cancel_a_queued_job_from_another_process(vertex, xcore_home, image):
    vertex.auto_run = False
    exp = run_units([{"args": ["x"]}, {"args": ["y"]}])
    first, second = list(vertex.jobs)
    vertex.set_state(second, "SUCCEEDED")
    result = xcore_cli("cancel", str(exp))
    assert result.returncode == 0, result.stderr
    assert vertex.jobs[first].state.name == "JOB_STATE_CANCELLED"
    assert vertex.jobs[second].state.name == "JOB_STATE_SUCCEEDED"  # an ended job is left alone
    found = wait(exp)
    assert sorted(j.status.value for j in found) == ["CANCELLED", "COMPLETED"]


def test_status_from_a_new_process_with_vertex_error_message(vertex, xcore_home, image):
    vertex.auto_run = False
    exp = run_units([{"args": ["x"]}])
    [name] = vertex.jobs
    vertex.set_state(name, "FAILED", "Resources are insufficient in region: us-central1.")
    result = xcore_cli("show", str(exp), "--json")
    assert result.returncode in (0, 1), result.stderr
    [job] = json.loads(result.stdout)["work_units"][0]["jobs"]
    assert job["status"] == "FAILED"
    assert job["message"] == "Vertex: failed: Resources are insufficient in region: us-central1."


def test_vertex_unreachable_reads_unknown_and_keeps_state(vertex, xcore_home, image, monkeypatch):
    vertex.auto_run = False
    exp = run_units([{"args": ["x"]}])
    vertex.fail("list", 503, "unavailable", times=1)
    from xgcp.api import VertexError

    with pytest.raises(VertexError, match="cannot ask Vertex: .*unavailable"):  # the core reads it as UNKNOWN
        states(exp)
    assert [s.status for s in states(exp)] == [Status.PENDING]  # and asks again later


def test_logs_follow_with_a_cursor_yields_each_line_once(vertex, xcore_home, image):
    vertex.auto_run = False
    exp = run_units([{"args": ["x"]}])
    [name] = vertex.jobs
    job_id = name.rsplit("/", 1)[-1]
    vertex.set_state(name, "RUNNING")
    for i in range(3):
        vertex.log(job_id, "workerpool0-0", f"line {i}")
    vertex.log(job_id, "workerpool0-1", "another replica: not shown")
    [job] = jobs(exp)
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.extend(logs(job, follow=True)))
    reader.start()
    time.sleep(1.5)
    for i in range(3, 6):
        vertex.log(job_id, "workerpool0-0", f"line {i} ✓")
    time.sleep(1.2)
    vertex.set_state(name, "SUCCEEDED")
    reader.join(timeout=20)
    assert not reader.is_alive()
    assert "".join(chunks) == "line 0\nline 1\nline 2\nline 3 ✓\nline 4 ✓\nline 5 ✓\n"


def test_import_xgcp_loads_no_google_library():
    """Only the empty namespace packages a .pth file of google-cloud-aiplatform creates at start-up."""
    code = ("import sys; before = set(sys.modules); import xgcp; xgcp.Vertex; xgcp.select_machine; import xgcp.hooks; "
            "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in ('google', 'grpc', 'proto', "
            "'requests')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_job_the_list_does_not_show_yet_is_asked_for_by_name_not_lost(vertex, xcore_home, image):
    vertex.auto_run = False
    exp = run_units([{"args": ["x"]}, {"args": ["y"]}])
    by_unit = {job.labels["xcore_unit"]: name for name, job in vertex.jobs.items()}  # created concurrently
    lagging, forgotten = by_unit["1"], by_unit["2"]
    vertex.set_state(lagging, "RUNNING")
    vertex.unlisted.add(lagging)
    vertex.forget(forgotten)
    found = states(exp)
    assert [s.status for s in found] == [Status.RUNNING, Status.FAILED]
    assert found[1].message.startswith("lost: Vertex has no CustomJob") and found[1].exit_code is None
    assert (vertex.calls["list"], vertex.calls["get"]) == (1, 2)


def test_sweep_creation_is_concurrent_and_bounded(vertex, xcore_home, image):
    vertex.auto_run = False
    vertex.create_delay = 0.05
    run_units([{"args": [str(i)]} for i in range(24)], xgcp.Vertex(create_parallelism=4))
    assert len(vertex.jobs) == 24
    assert 2 <= vertex.max_in_flight <= 4, vertex.max_in_flight


def test_status_is_one_list_call_per_project_and_location(vertex, xcore_home, image):
    vertex.auto_run = False
    with xm.create_experiment("two regions") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        for i in range(6):
            executor = xgcp.Vertex() if i % 2 else xgcp.Vertex(requirements=xm.JobRequirements(location="europe-west4"))
            experiment.add(xm.Job(exe, executor, args=[str(i)]))
    assert sorted({name.split("/")[3] for name in vertex.jobs}) == ["europe-west4", "us-central1"]
    before = vertex.calls["list"]
    assert [s.status for s in states(experiment.experiment_id)] == [Status.PENDING] * 6
    assert vertex.calls["list"] - before == 2


def test_multi_host_tpu_slice_runs_one_replica_per_host(vertex, xcore_home, image):
    with xm.create_experiment("tpu slice") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), IMAGE)])
        experiment.add(xm.JobGroup(
            chief=xm.Job(exe, xgcp.Vertex(requirements=xm.JobRequirements(tpu_v5e="4x4")), args=["slice"]),
            evaluator=xm.Job(exe, xgcp.Vertex(requirements=xm.JobRequirements(cpu=4)), args=["eval"])))
    found = wait(experiment.experiment_id)
    [created] = vertex.jobs.values()  # parsed by the fake with the real aiplatform_v1 types
    tpu, _, _, evaluator = created.job_spec.worker_pool_specs
    assert (tpu.machine_spec.machine_type, tpu.machine_spec.tpu_topology, tpu.machine_spec.accelerator_count,
            tpu.replica_count) == ("ct5lp-hightpu-4t", "4x4", 4, 4)
    assert (evaluator.machine_spec.machine_type, evaluator.replica_count) == ("n1-highcpu-4", 1)
    assert [j.status for j in found] == [Status.COMPLETED, Status.COMPLETED], [j.message for j in found]
    tasks = sorted({e["resource"]["labels"]["task_name"] for e in vertex.entries})
    assert tasks == ["workerpool0-0", "workerpool0-1", "workerpool0-2", "workerpool0-3", "workerpool3-0"]


def test_the_fake_rejects_a_tpu_slice_with_the_wrong_replica_count(vertex):
    from google.api_core import exceptions

    from xgcp import api

    body = {"display_name": "x", "job_spec": {"worker_pool_specs": [{
        "container_spec": {"image_uri": IMAGE}, "replica_count": 3,
        "machine_spec": {"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "4x4"}}]}}
    with pytest.raises(exceptions.BadRequest, match="replica_count must be 4 for tpu_topology 4x4"):
        api.create(api.client("us-central1"), "p", "us-central1", body, "r")


def test_every_job_option_reaches_the_custom_job_vertex_parses(vertex, xcore_home, image):
    """Scheduling, TensorBoard, web access, output dir, network, boot disk and labels, as the
    fake (the real aiplatform_v1 types) reads them."""
    vertex.auto_run = False
    board = xgcp.TensorboardCapability(name="projects/p/locations/us-central1/tensorboards/7",
                                       base_output_directory="gs://bucket/tb")
    executor = xgcp.Vertex(
        requirements=xm.JobRequirements(l4=1), scheduling="flex-start", max_wait_secs=1800, timeout_secs=7200,
        restart_job_on_worker_restart=True, tensorboard=board, service_account="sa@p.iam.gserviceaccount.com",
        enable_web_access=True, network="projects/123/global/networks/lab", boot_disk_type="pd-balanced",
        boot_disk_size_gb=250, labels={"team": "ml", "cost-center": "r_d"})
    run_units([{"args": ["x"]}], executor)
    [created] = vertex.jobs.values()
    spec = created.job_spec
    scheduling = spec.scheduling
    assert (scheduling.strategy.name, scheduling.max_wait_duration.total_seconds(), scheduling.timeout.total_seconds(),
            scheduling.restart_job_on_worker_restart) == ("FLEX_START", 1800, 7200, True)
    assert spec.tensorboard == board.name and spec.service_account == "sa@p.iam.gserviceaccount.com"
    assert spec.base_output_directory.output_uri_prefix == "gs://bucket/tb"  # TensorBoard's, none given
    assert spec.enable_web_access and spec.network == "projects/123/global/networks/lab"
    [pool] = spec.worker_pool_specs
    assert (pool.disk_spec.boot_disk_type, pool.disk_spec.boot_disk_size_gb) == ("pd-balanced", 250)
    assert (pool.machine_spec.machine_type, pool.machine_spec.accelerator_type.name) == ("g2-standard-4", "NVIDIA_L4")
    assert {k: v for k, v in created.labels.items() if not k.startswith("xcore_")} == {"team": "ml",
                                                                                     "cost-center": "r_d"}
    assert set(created.labels) >= {"xcore_store", "xcore_experiment", "xcore_unit", "xcore_request"}


@pytest.mark.parametrize(("code", "message", "expected"), [
    (403, "Permission 'logging.logEntries.list' denied on resource",
     "Permission denied reading logs in project fake-project: grant roles/logging.viewer, e.g. "
     "`gcloud projects add-iam-policy-binding fake-project --member=user:YOU --role=roles/logging.viewer`."),
    (403, "Cloud Logging API has not been used in project fake-project before or it is disabled.",
     "The Cloud Logging API is not enabled in project fake-project: run "
     "`gcloud services enable logging.googleapis.com --project fake-project`."),
])
def test_logs_that_cannot_be_read_say_what_to_run(vertex, xcore_home, image, code, message, expected):
    from xgcp.api import VertexError

    vertex.auto_run = False
    [job] = jobs(run_units([{"args": ["x"]}]))
    vertex.fail("logs", code, message)
    with pytest.raises(VertexError) as caught:
        "".join(logs(job))
    assert str(caught.value) == expected


def test_multi_host_gpu_job_runs_its_other_hosts_as_worker_pool_1(vertex, xcore_home, image):
    exp = run_units([{"args": ["x"]}], xgcp.Vertex(requirements=xm.JobRequirements(a100="8x2")))
    [job] = wait(exp)
    assert job.status is Status.COMPLETED, job.message
    [created] = vertex.jobs.values()
    chief, workers = created.job_spec.worker_pool_specs
    assert [(p.machine_spec.machine_type, p.replica_count) for p in (chief, workers)] == [
        ("a2-highgpu-8g", 1), ("a2-highgpu-8g", 1)]
    assert sorted({e["resource"]["labels"]["task_name"] for e in vertex.entries}) == ["workerpool0-0",
                                                                                     "workerpool1-0"]


def test_logs_from_an_unreachable_logging_endpoint_say_so(vertex, xcore_home, image, monkeypatch):
    import socket

    from xgcp.api import VertexError

    vertex.auto_run = False
    [job] = jobs(run_units([{"args": ["x"]}]))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("XGCP_LOGGING_ENDPOINT", closed)
    with pytest.raises(VertexError, match=f"^Cannot reach {closed} \\(ConnectionError\\)"):
        "".join(logs(job))


def test_pending_reasons_and_the_web_shell(vertex, xcore_home, image):
    """A waiting job says in Vertex's terms why; ``xcore shell`` names the job's web shell, or
    says how to get one."""
    vertex.auto_run = False
    exp = run_units([{"args": ["x"]}], xgcp.Vertex(enable_web_access=True))
    [name] = vertex.jobs  # the fake creates jobs PENDING
    assert [s.message for s in states(exp)] == ["pending: Vertex is provisioning its machines"]
    vertex.set_state(name, "QUEUED")
    assert [s.message for s in states(exp)] == ["pending: queued on Vertex (not processed yet)"]
    vertex.set_state(name, "RUNNING")
    result = xcore_cli("shell", f"{exp}/1")
    assert result.returncode == 1 and "launch with xgcp.Vertex(enable_web_access=True)" in result.stderr
    with vertex.lock:
        vertex.jobs[name].web_access_uris["workerpool0-0"] = "https://abc-dot-us-central1.aiplatform.example/"
    result = xcore_cli("shell", f"{exp}/1", "--", "nvidia-smi")
    assert result.returncode == 1, result.stderr
    assert "web shell in a browser, https://abc-dot-us-central1.aiplatform.example/ and run" in result.stderr
