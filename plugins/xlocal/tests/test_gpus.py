"""Local GPUs: the inventory, type matching, and exclusive (or shared) devices for real jobs
on a fake inventory (``XLOCAL_GPUS``). Each job records the devices it was given and its own
start and end times; the assertions are on those records, never on wall-clock thresholds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import xcore as xm
import xcore.hooks.host
import xlocal
from xcore.model.status import Status
from xlocal import gpus

PY = sys.executable

# A job: record (devices, CUDA_DEVICE_ORDER, start, end) in OUT/<pid>.json; hold its devices for
# a moment (or until the file named by its second argument exists).
RECORD = textwrap.dedent("""\
    import json, os, sys, time
    out, hold = sys.argv[1], sys.argv[2]
    start = time.time()
    open(os.path.join(out, f"{os.getpid()}.started"), "w").close()
    if hold.startswith("/"):
        while not os.path.exists(hold):
            time.sleep(0.01)
    else:
        time.sleep(float(hold))
    record = [os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("CUDA_DEVICE_ORDER"), start, time.time()]
    with open(os.path.join(out, f"{os.getpid()}.json"), "w") as f:
        json.dump(record, f)
""")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_QUIET", "1")
    monkeypatch.setenv("XCORE_BATCH_WINDOW", "0.01")
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "XLOCAL_SLOTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XLOCAL_GPUS", "0,1,2,3")
    xcore.hooks.host.reset_host()
    yield tmp_path / "home"
    xcore.hooks.host.reset_host()


@pytest.fixture
def out(tmp_path) -> Path:
    path = tmp_path / "records"
    path.mkdir()
    return path


def _records(out: Path) -> list[tuple[str | None, str | None, float, float]]:
    return [tuple(json.loads(p.read_text())) for p in sorted(out.glob("*.json"))]  # type: ignore[misc]


def _assert_exclusive(records, devices=("0", "1", "2", "3"), share=1) -> int:
    """No device has more than ``share`` jobs at any moment; returns the most jobs ever at once."""
    for device in devices:
        on_it = sorted((r[2], r[3]) for r in records if device in (r[0] or "").split(","))
        for i, (start, _end) in enumerate(on_it):
            overlapping = [s for s, e in on_it[:i] if e > start]
            assert len(overlapping) < share, (device, on_it)
    moments = sorted(r[2] for r in records)
    return max(sum(1 for r in records if r[2] <= t < r[3]) for t in moments)


def _job(experiment, out: Path, hold: str = "0.2"):
    [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", RECORD, str(out), hold])])
    return exe


# -- inventory and types ----------------------------------------------------------------------


def _fake_nvidia_smi(tmp_path: Path, monkeypatch, lines: list[str]) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")
    script.chmod(0o700)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # NVML not installed: nvidia-smi answers
    gpus._cache.clear()


H100S = ["0, GPU-aaaa-0000, NVIDIA H100 80GB HBM3, 81559", "1, GPU-bbbb-1111, NVIDIA H100 80GB HBM3, 81559"]


def test_inventory_sources_in_order(tmp_path, monkeypatch):
    for name in ("XLOCAL_GPUS", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    _fake_nvidia_smi(tmp_path, monkeypatch, H100S)
    found = gpus.inventory()
    assert [(g.key, g.id, g.name, g.memory_mib) for g in found.gpus] == [
        ("0", "GPU-aaaa-0000", "NVIDIA H100 80GB HBM3", 81559), ("1", "GPU-bbbb-1111", "NVIDIA H100 80GB HBM3", 81559)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")  # the launcher's own: a UUID prefix names device 1
    assert [(g.key, g.id) for g in gpus.inventory().gpus] == [("1", "GPU-bbbb-1111")]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,-1,0")  # CUDA stops at the first invalid index
    assert [g.key for g in gpus.inventory().gpus] == ["1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpus.inventory().gpus == ()
    monkeypatch.setenv("XLOCAL_GPUS", "2, 3")  # overrides everything; no names
    assert [(g.key, g.id, g.name) for g in gpus.inventory().gpus] == [("2", "2", None), ("3", "3", None)]
    monkeypatch.setenv("XLOCAL_GPUS", "none")
    assert gpus.inventory().gpus == ()


def test_no_tool_answers_means_no_gpus_and_a_clear_error(tmp_path, monkeypatch):
    for name in ("XLOCAL_GPUS", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi, no rocm-smi
    monkeypatch.setitem(sys.modules, "pynvml", None)
    gpus._cache.clear()
    found = gpus.inventory()
    assert found.gpus == ()
    with pytest.raises(xm.LaunchError, match="XLOCAL_GPUS=0,1"):
        gpus.eligible(found, 1, xm.ResourceType.LOCAL_GPU, "Job 1/train")


@pytest.mark.parametrize(("name", "memory", "asked", "fits"), [
    ("NVIDIA A100-SXM4-80GB", 81920, "A100", True),
    ("NVIDIA A100-SXM4-80GB", 81920, "A100_80GIB", True),
    ("NVIDIA A100-SXM4-40GB", 40960, "A100_80GIB", False),
    ("NVIDIA RTX A1000", 8192, "A100", False),
    ("NVIDIA A10", 23028, "A100", False),
    ("NVIDIA A100 80GB PCIe", 81920, "A10", False),
    ("NVIDIA L40S", 46068, "L4", False),
    ("NVIDIA L4", 23034, "L4", True),
    ("NVIDIA GB200", 189471, "B200", False),
    ("NVIDIA B200", 183359, "B200", True),
    ("Tesla V100-SXM2-16GB", 16384, "V100", True),
    ("Tesla V100-SXM2-16GB", 16384, "LOCAL_GPU", True),
])
def test_gpu_types_match_the_model_in_the_name(name, memory, asked, fits):
    assert gpus.matches(gpus.Gpu("0", "0", name, memory), xm.ResourceType[asked]) is fits


def test_a_type_the_machine_lacks_is_refused_at_launch(home, tmp_path, monkeypatch, out):
    monkeypatch.delenv("XLOCAL_GPUS")
    _fake_nvidia_smi(tmp_path, monkeypatch, H100S)
    found = gpus.inventory()
    with pytest.raises(xm.LaunchError, match=r"^Job 1/x asks for A100 GPUs; this machine has 2 GPUs \(NVIDIA H100"):
        gpus.eligible(found, 1, xm.ResourceType.A100, "Job 1/x")
    with pytest.raises(xm.LaunchError, match=r"asks for 3 H100 GPUs; this machine has 2 "):
        gpus.eligible(found, 3, xm.ResourceType.H100, "Job 1/x")
    with pytest.raises(xm.LaunchError, match="only GPUs"):
        gpus.requested(xm.JobRequirements(tpu_v4=8))
    with pytest.raises(xm.ExperimentUnitError, match=r"Job 1/python3? asks for A100 GPUs"):
        with xm.create_experiment("lacking") as experiment:
            experiment.add(xm.Job(_job(experiment, out, "0"), xlocal.Local(requirements=xm.JobRequirements(a100=1))))
    with xm.create_experiment("types") as experiment:
        exe = _job(experiment, out, "0")
        unit = experiment.add(xm.Job(exe, xlocal.Local(requirements=xm.JobRequirements(h100=1)))).result()
        unit.wait_until_complete().result()
        assert unit.get_status().is_completed
        assert unit.get_status().message.endswith("exit code 0 on GPU 0")
    [(devices, order, _, _)] = _records(out)
    assert (devices, order) == ("GPU-aaaa-0000", None)  # by UUID: no order to choose


# -- allocation -------------------------------------------------------------------------------


def test_twelve_one_gpu_jobs_never_share_a_device_and_run_at_most_four_at_once(home, out):
    with xm.create_experiment("sweep") as experiment:
        exe = _job(experiment, out)
        for _ in range(12):
            experiment.add(xm.Job(exe, xlocal.Local(requirements=xm.JobRequirements(a100=1))))
        experiment.wait_until_complete()
        statuses = [u.get_status() for u in experiment.work_units.values()]
    assert all(s.is_completed for s in statuses), statuses
    records = _records(out)
    assert len(records) == 12
    assert {r[0] for r in records} <= {"0", "1", "2", "3"} and {r[1] for r in records} == {"PCI_BUS_ID"}
    assert _assert_exclusive(records) <= 4
    on = {s.message.rsplit(" on GPU ", 1)[1] for s in statuses}
    assert on <= {"0", "1", "2", "3"}


def test_gpu_jobs_hold_no_cpu_slot_and_cpu_jobs_see_no_gpu(home, out, monkeypatch):
    """One CPU slot, four 1-GPU jobs that only end once all four have started: they can only
    finish if they run at once. A CPU job of the same batch gets CUDA_VISIBLE_DEVICES="" (its
    own value wins, and hide_gpus=False shows it the launcher's)."""
    monkeypatch.setenv("XLOCAL_SLOTS", "1")
    go = out / "go"
    waiter = (f"import os, time, pathlib\nd = pathlib.Path({str(out)!r})\n"
              "while len(list(d.glob('*.started'))) < 4: time.sleep(0.01)\n"
              f"open({str(go)!r}, 'w').close()\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # the launcher's view; XLOCAL_GPUS still wins
    with xm.create_experiment("slots") as experiment:
        exe = _job(experiment, out, str(go))
        for _ in range(4):
            experiment.add(xm.Job(exe, xlocal.Local(requirements=xm.JobRequirements(local_gpu=1))))
        [opener] = experiment.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", waiter])])
        experiment.add(xm.Job(opener, xlocal.Local()))
        experiment.add(xm.Job(exe, xlocal.Local()))
        experiment.add(xm.Job(exe, xlocal.Local(), env_vars={"CUDA_VISIBLE_DEVICES": "3"}))
        experiment.add(xm.Job(exe, xlocal.Local(hide_gpus=False)))
        experiment.wait_until_complete()
    records = _records(out)
    gpu_jobs = [r for r in records if r[1] == "PCI_BUS_ID"]
    assert sorted(r[0] for r in gpu_jobs) == ["0", "1", "2", "3"]
    assert max(r[2] for r in gpu_jobs) < min(r[3] for r in gpu_jobs)  # all four ran at once
    assert sorted(r[0] for r in records if r[1] is None) == ["", "0,1,2,3", "3"]


def test_two_gpu_jobs_get_two_distinct_devices(home, out):
    with xm.create_experiment("pairs") as experiment:
        exe = _job(experiment, out)
        for _ in range(6):
            experiment.add(xm.Job(exe, xlocal.Local(requirements=xm.JobRequirements(v100=2))))
        experiment.wait_until_complete()
    records = _records(out)
    assert len(records) == 6
    for devices, _, _, _ in records:
        pair = devices.split(",")
        assert len(pair) == len(set(pair)) == 2 and set(pair) <= {"0", "1", "2", "3"}
    assert _assert_exclusive(records) <= 2


LAUNCHER = textwrap.dedent("""\
    import sys
    import xcore as xm, xlocal
    record, out = sys.argv[1], sys.argv[2]
    with xm.create_experiment("launcher") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", record, out, "0.2"])])
        for _ in range(6):
            experiment.add(xm.Job(exe, xlocal.Local(requirements=xm.JobRequirements(gpu=1))))
        experiment.wait_until_complete()
    print("statuses", sorted(str(u.get_status().status) for u in experiment.work_units.values()))
""")


def test_two_launchers_share_the_devices_without_overlap(home, out, tmp_path):
    script = tmp_path / "launch.py"
    script.write_text(LAUNCHER)
    env = dict(os.environ)
    launchers = [subprocess.Popen([PY, str(script), RECORD, str(out)], env=env, stdout=subprocess.PIPE, text=True)
                 for _ in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in launchers]
    assert all(p.returncode == 0 for p in launchers), outputs
    records = _records(out)
    assert len(records) == 12
    _assert_exclusive(records)


def test_shared_devices_hold_at_most_gpu_share_jobs_and_never_with_an_exclusive_one(home, out, monkeypatch):
    monkeypatch.setenv("XLOCAL_GPUS", "0,1")
    with xm.create_experiment("share") as experiment:
        exe = _job(experiment, out)
        for _ in range(8):
            experiment.add(xm.Job(exe, xlocal.Local(requirements=xm.JobRequirements(local_gpu=1), gpu_share=2)))
        for _ in range(2):
            experiment.add(xm.Job(exe, xlocal.Local(requirements=xm.JobRequirements(local_gpu=1))))
        experiment.wait_until_complete()
    records = _records(out)
    assert len(records) == 10
    starts = sorted(records, key=lambda r: r[2])
    shared, exclusive = starts[:8], starts[8:]  # jobs start in order: the exclusive ones were added last
    _assert_exclusive(shared, ("0", "1"), share=2)
    for device in ("0", "1"):
        for mine in (r for r in exclusive if r[0] == device):
            assert not [r for r in records if r is not mine and r[0] == device and r[2] < mine[3] and r[3] > mine[2]]


def test_a_killed_job_frees_its_device_and_the_waiting_job_says_why(home, out, monkeypatch):
    monkeypatch.setenv("XLOCAL_GPUS", "7")
    never = out / "never"
    try:
        with xm.create_experiment("kill") as experiment:
            holder_exe = _job(experiment, out, str(never))
            exe = _job(experiment, out, "0")
            holder = experiment.add(xm.Job(holder_exe, xlocal.Local(requirements=xm.JobRequirements(gpu=1)))).result()
            waiting = experiment.add(xm.Job(exe, xlocal.Local(requirements=xm.JobRequirements(gpu=1)))).result()
            deadline, reason = time.monotonic() + 60, ": waiting for 1 GPU (1 of 1 busy)"
            while not waiting.get_status().message.endswith(reason) and time.monotonic() < deadline:
                time.sleep(0.05)
            status = waiting.get_status()
            assert (status.status, status.message.split(": ", 1)[1]) == (Status.PENDING, reason[2:])
            running = holder.get_status().message
            assert running.split(": ", 1)[1].startswith("pid ") and running.endswith(" on GPU 7")
            os.kill(int(running.split()[2]), signal.SIGKILL)
            waiting.wait_until_complete().result()
            assert waiting.get_status().is_completed
            assert "killed by signal 9" in holder.get_status().message
    finally:
        never.touch()  # a holder left running by a failed assertion ends
    [(devices, _, _, _)] = _records(out)
    assert devices == "7"


def test_without_gpus_jobs_see_the_launchers_environment_and_a_gpu_job_fails_to_launch(home, out, monkeypatch):
    monkeypatch.setenv("XLOCAL_GPUS", "none")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    with xm.create_experiment("no gpus") as experiment:
        experiment.add(xm.Job(_job(experiment, out, "0"), xlocal.Local()))
        experiment.wait_until_complete()
    [(devices, order, _, _)] = _records(out)
    assert (devices, order) == ("5", None)  # nothing to hide: the launcher's own value
    with pytest.raises(xm.ExperimentUnitError, match=r"asks for 1 GPU, but xlocal found no GPUs \(XLOCAL_GPUS\)"):
        with xm.create_experiment("gpu without gpus") as experiment:
            experiment.add(xm.Job(_job(experiment, out, "0"), xlocal.Local(requirements=xm.JobRequirements(gpu=1))))
