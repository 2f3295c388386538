"""``xcore show --json`` writes a sweep's shared executor and executable once, not per job."""

from __future__ import annotations

import json

import xcore as xm
from xcore.cli.main import main
from xcore.testing import fake, plugin_host


def test_shared_executor_and_executable_are_one_table_entry_each(xcore_home, capsys):
    plugin_host({"fake": fake})
    with xm.create_experiment("shared") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        executor = fake.FakeExecutor(hold=True)
        for i in range(20):
            experiment.add(xm.Job(exe, executor, args={"i": i}))
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True, fail_launch="")))  # equal content: same entry
    capsys.readouterr()
    assert main(["show", str(experiment.experiment_id), "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    jobs = [job for unit in data["work_units"] for job in unit["jobs"]]
    assert len(jobs) == 21
    assert list(data["executors"]) == ["1"] and list(data["executables"]) == ["1"]
    assert data["executors"]["1"]["hold"] is True
    assert all(job["executor_id"] == "1" and job["executable_id"] == "1" for job in jobs)
    assert not any("executor" in job or "executable" in job for job in jobs)
    assert out.count('"hold"') == 1
