"""What ``xcore cancel`` of a sweep costs, counted rather than timed (issue 31: a 100,000-task
sweep took 53 s to cancel): the units are read once and each job's handle is rebuilt once, for
the query before the cancel, the cancel itself and the query after it."""

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
    reads, loads = [], []
    real_read, real_load = store_class.work_units, host.serializer.load

    def counted_read(self, experiment_id, work_unit_ids=None):  # noqa: ANN001, ANN202
        reads.append(work_unit_ids)
        return real_read(self, experiment_id, work_unit_ids)

    def counted_load(data, cls=None):  # noqa: ANN001, ANN202
        loads.append(data)
        return real_load(data, cls)

    monkeypatch.setattr(store_class, "work_units", counted_read)
    monkeypatch.setattr(host.serializer, "load", counted_load)
    assert cancel(argparse.Namespace(target=str(experiment.experiment_id))) == 0
    assert capsys.readouterr().out.startswith(f"cancelled {N} jobs of experiment")
    assert reads == [None], reads
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
