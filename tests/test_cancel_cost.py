"""What ``xcore cancel`` of a sweep costs, counted rather than timed (issue 31: a 100,000-task
sweep took 53 s to cancel): the active jobs are read once, as the light rows polling reads (no
full record of each job), and each job's handle is rebuilt once, for the query before the
cancel, the cancel itself and the query after it."""

from __future__ import annotations

import argparse

import pytest

import xcore as xm
from xcore.cli.commands import cancel
from xcore.errors import NotFoundError
from xcore.launch.registry import open_store
from xcore.model.status import Status
from xcore.testing import fake, plugin_host

N = 30


def test_cancel_of_a_sweep_reads_its_units_once_and_rebuilds_each_handle_once(xcore_home, monkeypatch, capsys):
    host = plugin_host({"fake": fake})
    with xm.create_experiment("sweep") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for _ in range(N):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    store_class = type(open_store())
    reads, light, loads = [], [], []
    real_read, real_light, real_load = store_class.work_units, store_class.active_jobs, host.serializer.load

    def counted_read(self, experiment_id, work_unit_ids=None):  # noqa: ANN001, ANN202
        reads.append(work_unit_ids)
        return real_read(self, experiment_id, work_unit_ids)

    def counted_light(self, experiment_ids):  # noqa: ANN001, ANN202
        light.append(list(experiment_ids))
        return real_light(self, experiment_ids)

    def counted_load(data, cls=None):  # noqa: ANN001, ANN202
        loads.append(data)
        return real_load(data, cls)

    monkeypatch.setattr(store_class, "work_units", counted_read)
    monkeypatch.setattr(store_class, "active_jobs", counted_light)
    monkeypatch.setattr(host.serializer, "load", counted_load)
    assert cancel(argparse.Namespace(target=str(experiment.experiment_id))) == 0
    assert capsys.readouterr().out.startswith(f"cancelled {N} jobs of experiment")
    assert (reads, light) == ([], [[experiment.experiment_id]]), (reads, light)
    assert len(loads) == N, f"{len(loads)} handle loads for {N} jobs"
    jobs = [job for unit in real_read(open_store(), experiment.experiment_id) for job in unit.jobs]
    assert [job.status for job in jobs] == [Status.CANCELLED] * N


def test_cancel_of_an_unknown_work_unit_says_so(xcore_home, capsys):
    plugin_host({"fake": fake})
    with xm.create_experiment("one") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    with pytest.raises(NotFoundError, match="has no work unit 7"):
        cancel(argparse.Namespace(target=f"{experiment.experiment_id}/7"))


def test_cancel_of_one_work_unit_cancels_only_its_jobs(xcore_home, capsys):
    plugin_host({"fake": fake})
    with xm.create_experiment("units") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for _ in range(3):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    assert cancel(argparse.Namespace(target=f"{experiment.experiment_id}/2")) == 0
    assert capsys.readouterr().out.strip() == f"cancelled 1 job of work unit {experiment.experiment_id}/2"
    units = open_store().work_units(experiment.experiment_id)
    assert [[job.status for job in unit.jobs] for unit in units] == [
        [Status.PENDING], [Status.CANCELLED], [Status.PENDING]]
