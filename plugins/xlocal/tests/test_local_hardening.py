"""xlocal under hostile timing and input: a slow-starting runner, jobs that cannot start."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

import pytest

import xcore as xm
import xlocal
from xcore.hooks.host import get_host
from xcore.model.status import Status
from xlocal import processes
from xlocal.handles import ProcessHandle

pytestmark = pytest.mark.usefixtures("xcore_home")  # the isolation the core's tests get from conftest

PY = sys.executable


def _slow_runner(tmp_path: Path, monkeypatch, seconds: float) -> None:
    """Make every xlocal runner start ``seconds`` late (a loaded machine, a slow interpreter)."""
    hook = tmp_path / "slowhook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import time\n"
        "with open('/proc/self/cmdline', 'rb') as f:\n"
        "    if b'xlocal/runner.py' in f.read():\n"
        f"        time.sleep({seconds})\n"
    )
    monkeypatch.setenv("PYTHONPATH", f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    processes._drop_server()  # a serving runner started by an earlier test would not be slow


def test_slow_starting_runner_never_makes_healthy_jobs_fail(tmp_path, monkeypatch):
    """Status is read over and over while the runner starts late; no job may ever read FAILED."""
    _slow_runner(tmp_path, monkeypatch, 1.0)
    units = 40
    with xm.create_experiment("slow runner") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), "true")])
        for i in range(units):
            experiment.add(xm.Job(exe, xlocal.Local(), args={"i": i}))
    store = experiment._store
    host = get_host()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        jobs = [j for u in store.work_units(experiment.experiment_id) for j in u.jobs]
        if all(j.handle for j in jobs):
            break
        time.sleep(0.02)
    handles = [host.serializer.load(j.handle) for j in jobs]
    wrongly_failed: set[int] = set()
    queries = 0
    while time.monotonic() < deadline:
        states = processes.states(handles)
        queries += 1
        wrongly_failed |= {i for i, s in enumerate(states) if s.status is Status.FAILED}
        if all(s.status.is_terminal for s in states):
            break
    print(f"{queries} status queries over {units} jobs; wrongly failed: {len(wrongly_failed)}")
    assert queries > 10, "the runner's start was not observed"
    assert wrongly_failed == set()
    assert [s.status for s in states] == [Status.COMPLETED] * units
    experiment.wait_until_complete()
    statuses = [u.get_status() for u in experiment.work_units.values()]
    assert all(s.is_completed for s in statuses), [s.message for s in statuses if not s.is_completed]


def test_runner_file_appearing_mid_query_does_not_fail_later_jobs(tmp_path, monkeypatch):
    """Deterministic: the runner (holding its lock) writes runner.json between two jobs' checks."""
    run = tmp_path / "run"
    (run / "jobs").mkdir(parents=True)
    (run / "batch.json").write_text("{}")
    lock = os.open(run / "runner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # as the launcher does before spawning the runner
    real_read = processes.read_events
    calls = []

    def read_then_runner_starts(run_dir):
        calls.append(1)
        if len(calls) == 2:
            (run / "runner.json").write_text(json.dumps({"pid": os.getpid(), "t": time.time()}))
        return real_read(run_dir)

    monkeypatch.setattr(processes, "read_events", read_then_runner_starts)
    handles = [ProcessHandle(str(run), i, log_path=str(tmp_path / f"{i}.log")) for i in range(5)]
    try:
        assert [s.status for s in processes.states(handles)] == [Status.PENDING] * 5
    finally:
        os.close(lock)
    monkeypatch.setattr(processes, "read_events", real_read)
    assert {s.status for s in processes.states(handles)} == {Status.FAILED}, "lock released: the runner is gone"


def test_nul_byte_in_one_job_fails_that_job_alone(tmp_path):
    """The runner survives a job the OS refuses to start; the rest of the batch runs."""
    from xcore.model.execution import LaunchContext, LaunchRequest
    from xcore.progress import Progress
    from xlocal.executables import LocalProcess

    out = tmp_path / "out"
    out.mkdir()
    exe = LocalProcess(name="py", command=[PY, "-c", f"import sys; open({str(out)!r} + '/' + sys.argv[1], 'w')"])
    args = [["a"], ["b\0c"], ["d"]]
    requests = [LaunchRequest(i + 1, 1, i + 1, "job", exe, xlocal.Local(), argv, {}) for i, argv in enumerate(args)]
    handles = processes.launch(requests, LaunchContext(tmp_path / "state", Progress(), "nul"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = processes.states(handles)
        if all(s.status.is_terminal for s in states):
            break
        time.sleep(0.05)
    assert [s.status for s in states] == [Status.COMPLETED, Status.FAILED, Status.COMPLETED]
    assert "NUL byte" in states[1].message
    assert sorted(p.name for p in out.iterdir()) == ["a", "d"]


def test_missing_cwd_fails_the_job_at_once_naming_the_directory(tmp_path):
    missing = tmp_path / "no-such-dir"
    started = time.monotonic()
    with xm.create_experiment("cwd") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", "pass"])])
        unit = experiment.add(xm.Job(exe, xlocal.Local(cwd=str(missing)))).result()
    experiment.wait_until_complete()
    status = unit.get_status()
    assert status.is_failed
    assert "FileNotFoundError" in status.message and str(missing) in status.message, status.message
    assert "runner exited" not in status.message
    assert time.monotonic() - started < 10


def test_missing_cwd_through_the_cli(tmp_path):
    from xlocal_helpers import run_xcore, write_script

    missing = tmp_path / "gone"
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("cwd") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", "pass"])])
    e.add(xm.Job(exe, xlocal.Local(cwd={str(missing)!r})))
""")
    assert run_xcore("launch", str(script)).returncode == 0
    waited = run_xcore("wait", "1", "--timeout", "20")
    assert waited.returncode not in (0, 124), waited.stdout + waited.stderr
    show = json.loads(run_xcore("show", "1", "--json").stdout)
    [job] = show["work_units"][0]["jobs"]
    assert job["status"] == "FAILED"
    assert "FileNotFoundError" in job["message"] and str(missing) in job["message"], job["message"]
