"""Why a cluster job waits, in the scheduler's own words: Slurm's squeue reason, Grid Engine's
``qstat -j`` scheduling info (one call for all the waiting jobs of a poll)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import require_service
from xhpc.schedulers import GridEngineScheduler, scheduling_info
from xhpc_helpers import HOW, cluster_toml, service_up

QSTAT_J = """\
==============================================================
job_number:                 41
job_name:                   a
scheduling info:            Job is in hold state
==============================================================
job_number:                 42
scheduling info:            cannot run in PE "smp" because it only offers 0 slots
                            (-l hostname=x) cannot run at host "vm" because it offers only hl:hostname=vm
"""


def test_scheduling_info_is_read_per_job_and_becomes_the_message() -> None:
    assert scheduling_info(QSTAT_J) == {
        "41": "Job is in hold state",
        "42": 'cannot run in PE "smp" because it only offers 0 slots; (-l hostname=x) cannot run at host "vm" '
              "because it offers only hl:hostname=vm"}
    xml = ("<?xml version='1.0'?><job_info><job_info>"
           "<job_list state='pending'><JB_job_number>41</JB_job_number><state>hqw</state></job_list>"
           "<job_list state='pending'><JB_job_number>42</JB_job_number><state>qw</state></job_list>"
           "<job_list state='pending'><JB_job_number>43</JB_job_number><state>qw</state></job_list>"
           "</job_info></job_info>\n")
    states = GridEngineScheduler().parse_states(xml + "@@XHPC-QACCT\n@@XHPC-WHY\n" + QSTAT_J)
    assert states[("41", 1)].message == "pending: held (Job is in hold state)"
    assert states[("42", 1)].message.startswith('pending: cannot run in PE "smp" because it only offers 0 slots; ')
    assert states[("43", 1)].message == "pending: queued"  # no scheduling info yet
    command = GridEngineScheduler().query_command(["41", "42", "43"])
    assert command.count("qstat -j") == 1  # batched: one call for every waiting job


def _configure(xcore_env: Path, scheduler: str) -> None:
    require_service(scheduler, lambda: service_up(scheduler), HOW)
    staging = str(xcore_env / "staging")
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", scheduler, "local", staging))


def _messages(experiment_id: int, want: int, deadline_secs: float = 60) -> list[str]:
    """What `xcore show --json` says about the units once every one has a reason (or time is up)."""
    import json

    deadline = time.monotonic() + deadline_secs
    while True:
        out = subprocess.run([sys.executable, "-m", "xcore.cli.main", "show", str(experiment_id), "--json"],
                             capture_output=True, text=True, env=os.environ.copy(), timeout=120, check=False)
        data = json.loads(out.stdout)
        messages = [job["message"] for unit in data["work_units"] for job in unit["jobs"]]
        settled = [m for m in messages if m not in ("pending: queued", "pending: submitted", "pending: on hold")]
        if len(settled) >= want or time.monotonic() > deadline:
            return messages
        time.sleep(0.5)


@pytest.mark.infra("sge")
def test_grid_engine_says_why_held_and_unschedulable_jobs_wait(xcore_env: Path) -> None:
    import xhpc

    _configure(xcore_env, "sge")
    name = f"why{uuid.uuid4().hex[:6]}"
    with xm.create_experiment(title=name) as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.GridEngine.Spec())])
        experiment.add(xm.Job(exe, xhpc.GridEngine(job_name=name, directives=["-h"])))
        experiment.add(xm.Job(exe, xhpc.GridEngine(job_name=name, parallel_environment="smp",
                                                   requirements=xm.JobRequirements(cpu=64))))
    ids = sorted({job.handle["job_id"] for job in experiment._all_jobs()})
    try:
        held, big = _messages(experiment.experiment_id, 2)
        assert held == "pending: held (Job is in hold state)"
        assert big.startswith("pending: ") and "smp" in big and "slots" in big, big
    finally:
        subprocess.run(["qdel", *ids], capture_output=True, timeout=60, check=False)


@pytest.mark.infra("slurm")
def test_slurm_says_why_held_and_late_tasks_wait_and_refuses_beyond_its_limits(xcore_env: Path) -> None:
    import xhpc

    _configure(xcore_env, "slurm")
    name = f"why{uuid.uuid4().hex[:6]}"
    with xm.create_experiment(title=name) as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, xhpc.Slurm(job_name=name, directives=["--hold"])))
        experiment.add(xm.Job(exe, xhpc.Slurm(job_name=name, directives=["--begin=now+3600"])))
    tasks = [f"{job.handle['job_id']}_{job.handle['task']}" for job in experiment._all_jobs()]
    try:
        assert _messages(experiment.experiment_id, 2) == ["pending: JobHeldUser", "pending: BeginTime"]
    finally:
        subprocess.run(["scancel", *tasks], capture_output=True, timeout=60, check=False)
    # beyond the partition's limits (EnforcePartLimits=ALL here): refused at once, Slurm's words kept
    with pytest.raises(xm.ExperimentUnitError), xm.create_experiment(title=name) as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, xhpc.Slurm(job_name=name, directives=["--mem=999999G"])))
    [job] = experiment._all_jobs()
    assert job.status is xm.Status.FAILED and "Memory specification can not be satisfied" in job.message, job.message
