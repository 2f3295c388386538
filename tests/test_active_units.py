"""An experiment reads CANCELLED (or FAILED) as soon as one unit does, while its other units
still run. Whoever keeps statuses fresh must go on asking the backend about those units: the
dashboard's refresher and ``xcore list`` stopped at the first cancelled unit, so a unit that
ended afterwards read RUNNING for good (a fresh CI run failed on the dashboard's live update)."""

from __future__ import annotations

import threading
import time

import xcore as xm
from xcore.cli.main import main
from xcore.hooks.host import get_host
from xcore.model.status import Status
from xcore.store.records import ExperimentRecord
from xcore.testing import fake, plugin_host


def _one_cancelled_one_running() -> tuple[xm.Experiment, object]:
    """Unit 1 cancelled, unit 2 held active; returns the experiment and unit 2's handle."""
    plugin_host({"fake": fake})
    with xm.create_experiment("half cancelled") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for i in range(2):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True), args={"i": i}))
    experiment.work_units[1].stop()
    [first, second] = sorted(experiment._all_jobs(), key=lambda j: j.work_unit_id)
    assert first.status is Status.CANCELLED and second.status.is_active
    record = experiment._store.get_experiment(experiment.experiment_id)
    assert record.status is Status.CANCELLED and record.has_active_units
    return experiment, get_host().serializer.load(second.handle)


def _second_status(experiment: xm.Experiment) -> Status:
    units = experiment._store.work_units(experiment.experiment_id, [2])
    return units[0].jobs[0].status


def test_an_experiment_with_a_running_unit_has_active_units_whatever_its_status_reads():
    assert ExperimentRecord(1, "t", status_counts={"CANCELLED": 1, "RUNNING": 1}).has_active_units
    assert ExperimentRecord(1, "t", status_counts={"FAILED": 2, "PENDING": 1}).has_active_units
    assert ExperimentRecord(1, "t").has_active_units  # LAUNCHING: nothing recorded yet
    assert not ExperimentRecord(1, "t", status_counts={"CANCELLED": 1, "COMPLETED": 3}).has_active_units
    assert not ExperimentRecord(1, "t", status_counts={"FAILED": 1}).has_active_units


def test_the_dashboard_refresher_follows_units_that_run_on_in_a_cancelled_experiment():
    from xcore.ui.server import refresh_forever

    experiment, handle = _one_cancelled_one_running()
    fake.set_state(handle, Status.COMPLETED, "exit code 0", 0)
    stop = threading.Event()
    refresher = threading.Thread(target=refresh_forever, args=(experiment._store, get_host(), stop, 0.05))
    refresher.start()
    try:
        deadline = time.monotonic() + 30
        while _second_status(experiment) is not Status.COMPLETED and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        refresher.join(30)
    assert _second_status(experiment) is Status.COMPLETED


def test_xcore_list_refreshes_units_that_run_on_in_a_cancelled_experiment(capsys):
    experiment, handle = _one_cancelled_one_running()
    fake.set_state(handle, Status.COMPLETED, "exit code 0", 0)
    assert main(["list"]) == 0
    capsys.readouterr()
    assert _second_status(experiment) is Status.COMPLETED
