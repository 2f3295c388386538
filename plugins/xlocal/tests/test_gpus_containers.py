"""A container that asks for GPUs, on a fake inventory (``XLOCAL_GPUS``) and a real engine:
the runner chooses its devices and the request that reaches the engine names exactly those
(``--gpus device=...``, seen with ``docker inspect``). This machine has no NVIDIA runtime, so
the engine creates the container but refuses to start it: the job reads FAILED with the
engine's words, and the created container is what is inspected."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import xcore as xm
import xcore.hooks.host
from xcore.testing import require_service

docker = pytest.importorskip("docker", reason="pip install 'xcore-xlocal[docker]'")

import xlocal  # noqa: E402  (after the importorskip above)
from xcore import images  # noqa: E402
from xlocal.gpu_container import device_request  # noqa: E402

BASE_IMAGE = os.environ.get("XLOCAL_TEST_BASE_IMAGE", "xcore-python:3.11")


def _engine_up() -> bool:
    try:
        client = images.connect()
        client.api.inspect_image(BASE_IMAGE)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        images.engine.forget()
        return False


@pytest.fixture
def engine():
    require_service("dockerd", _engine_up,
                    f"run `sudo bash scripts/infra/docker.sh` (starts dockerd, builds {BASE_IMAGE})")
    return images.connect()


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_QUIET", "1")
    monkeypatch.setenv("XCORE_BATCH_WINDOW", "0.01")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("XLOCAL_GPUS", "0,1,2,3")
    xcore.hooks.host.reset_host()
    yield tmp_path / "home"
    xcore.hooks.host.reset_host()


def test_the_devices_the_runner_chose_reach_the_engine(engine, home):
    with xm.create_experiment("gpu containers") as experiment:
        [exe] = experiment.package([xm.container(xlocal.Local.Spec(), BASE_IMAGE, args=["python3", "-c", "pass"])])
        executor = xlocal.Local(requirements=xm.JobRequirements(gpu=2), kill_grace_secs=1)
        for _ in range(2):
            experiment.add(xm.Job(exe, executor))
        experiment.wait_until_complete()
    units = experiment._store.work_units(experiment.experiment_id)
    jobs = [unit.jobs[0] for unit in units]
    logs = [Path(job.log_path).read_text() for job in jobs]
    # Each job's log names its container (other tests share the engine and repeat experiment ids).
    names = [re.search(r"xcore: container (\S+) on GPU ", log)[1] for log in logs]  # type: ignore[index]
    try:
        for job, log, name in zip(jobs, logs, names, strict=True):
            info = engine.api.inspect_container(name)
            assert info["Config"]["Labels"]["xcore.job_id"] == str(job.id)
            [request] = info["HostConfig"]["DeviceRequests"]
            devices = request["DeviceIDs"]
            assert len(set(devices)) == 2 and set(devices) <= {"0", "1", "2", "3"}
            assert request == device_request(devices)  # `--gpus device=...`: by id, Count 0, capability gpu
            assert job.message.endswith(f" on GPU {','.join(devices)}"), job.message
            if job.status is xm.Status.FAILED:  # no NVIDIA runtime here: the engine's own words
                assert "cannot start the container" in log and "exit code 125" in job.message, (log, job.message)
            else:
                assert job.status is xm.Status.COMPLETED, (job.status, job.message, log)
    finally:
        for name in names:
            engine.api.remove_container(name, force=True)
