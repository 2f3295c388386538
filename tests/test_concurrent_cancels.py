"""Two ``xcore cancel`` of one experiment at once (issue 30): each job is counted by the one
that recorded it CANCELLED, so the two counts add up to the jobs cancelled, not twice that.
A barrier in the backend's cancel makes both read the jobs active first: no timing."""

from __future__ import annotations

import threading

import xcore as xm
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.model.status import Status
from xcore.runtime.tracking import cancel_jobs
from xcore.testing import fake, plugin_host


def test_of_two_concurrent_cancels_only_the_one_that_cancelled_counts_each_job(xcore_home, monkeypatch):
    host = plugin_host({"fake": fake})
    with xm.create_experiment("two cancels") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for _ in range(20):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    store = open_store()
    barrier = threading.Barrier(2)
    real_cancel = host.cancel

    def cancel_together(kind, handles):
        barrier.wait(timeout=60)  # both cancellers have found every job active
        real_cancel(kind, handles)

    monkeypatch.setattr(host, "cancel", cancel_together)
    counts: list[int] = []

    def canceller() -> None:
        jobs = [job for unit in store.work_units(experiment.experiment_id) for job in unit.jobs]
        counts.append(cancel_jobs(store, get_host(), jobs))

    threads = [threading.Thread(target=canceller) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(counts) == [0, 20]
    jobs = [job for unit in store.work_units(experiment.experiment_id) for job in unit.jobs]
    assert [job.status for job in jobs] == [Status.CANCELLED] * 20
