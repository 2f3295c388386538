"""``xcore cancel`` while ``xcore launch`` is still submitting (issue 30, item 2): the request is
recorded in the store, the launcher reads it before and after each submission, so units not
submitted yet end CANCELLED without reaching the backend and a batch in flight is cancelled
once it returns. Each step waits for a file the other side writes: no timing assumptions."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from core_helpers import run_xcore_fake, write_fake_script
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.model.status import Status
from xcore.testing import fake, plugin_host

SLOW_ADDS = """
import pathlib, time
from xcore.testing import plugin_host
plugin_host({"fake": fake})
marker, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
with xm.create_experiment("cancelled while adding") as experiment:
    [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
    experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True))).result()  # submitted
    marker.write_text(str(experiment.experiment_id))
    while not go.exists():
        time.sleep(0.05)
    for _ in range(300):
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
"""

BEFORE_THE_FIRST_ADD = """
import pathlib, time
from xcore.testing import plugin_host
plugin_host({"fake": fake})
marker, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
with xm.create_experiment("cancelled before its first add") as experiment:
    [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
    marker.write_text(str(experiment.experiment_id))
    while not go.exists():
        time.sleep(0.05)
    for _ in range(50):
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
"""

HELD_AT_LAUNCH = """
from xcore.testing import plugin_host
plugin_host({"fake": fake})
with xm.create_experiment("cancelled while submitting") as experiment:
    [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
    for _ in range(5):
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True, pause_after_launch=sys.argv[1])))
"""


def _wait_for(path: Path, launcher: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert launcher.poll() is None, launcher.communicate()
        assert time.monotonic() < deadline, f"the launcher never wrote {path}"
        time.sleep(0.05)


def _jobs(experiment_id: int):
    return [job for unit in open_store().work_units(experiment_id) for job in unit.jobs]


def _nothing_runs(jobs) -> None:
    plugin_host({"fake": fake})
    for job in jobs:
        assert job.status is Status.CANCELLED, (job.id, job.status, job.message)
        if job.handle is not None:
            assert fake.was_cancelled(get_host().serializer.load(job.handle))


def test_units_added_after_a_cancel_are_recorded_cancelled_and_never_submitted(xcore_home, tmp_path):
    marker, go = tmp_path / "first-submitted", tmp_path / "go"
    script = write_fake_script(tmp_path / "launch.py", SLOW_ADDS)
    launcher = subprocess.Popen([sys.executable, str(script), str(marker), str(go)], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(marker, launcher)
    experiment_id = int(marker.read_text())
    cancelled = run_xcore_fake("cancel", str(experiment_id))
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"cancelled 1 job of experiment {experiment_id}" in cancelled.stdout
    go.touch()
    _, err = launcher.communicate(timeout=120)
    jobs = _jobs(experiment_id)
    submitted = [job for job in jobs if job.handle is not None]
    assert (len(jobs), len(submitted)) == (301, 1), err
    assert {job.message for job in jobs if job.handle is None} == {"not launched: cancelled by `xcore cancel` during "
                                                                   "the launch"}
    _nothing_runs(jobs)


def test_a_batch_in_flight_when_cancel_runs_is_cancelled_once_submitted(xcore_home, tmp_path):
    marker = tmp_path / "submitted"
    script = write_fake_script(tmp_path / "launch.py", HELD_AT_LAUNCH)
    launcher = subprocess.Popen([sys.executable, str(script), str(marker)], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(marker, launcher)  # the backend has the 5 jobs; the store has no handle yet
    cancelled = run_xcore_fake("cancel", "1")
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelled 0 jobs of experiment 1" in cancelled.stdout
    assert "5 jobs not submitted yet" in cancelled.stdout
    Path(str(marker) + ".release").touch()
    _, err = launcher.communicate(timeout=120)
    jobs = _jobs(1)
    assert len(jobs) == 5 and all(job.handle is not None for job in jobs), err
    _nothing_runs(jobs)


def test_a_cancel_issued_as_soon_as_the_experiment_exists_submits_nothing(xcore_home, tmp_path):
    marker, go = tmp_path / "created", tmp_path / "go"
    script = write_fake_script(tmp_path / "launch.py", BEFORE_THE_FIRST_ADD)
    launcher = subprocess.Popen([sys.executable, str(script), str(marker), str(go)], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(marker, launcher)
    cancelled = run_xcore_fake("cancel", marker.read_text())
    assert cancelled.returncode == 0, cancelled.stderr
    go.touch()
    _, err = launcher.communicate(timeout=120)
    jobs = _jobs(int(marker.read_text()))
    assert len(jobs) == 50 and not [job for job in jobs if job.handle is not None], err
    _nothing_runs(jobs)
