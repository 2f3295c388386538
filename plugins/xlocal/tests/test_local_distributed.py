"""Replicated jobs and JobGroups on xlocal: N processes with their framework's variables, and
each role's address (docs/gangs.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import xcore as xm
import xcore.testing.allreduce
import xlocal
from xcore.model.status import Status
from xlocal import replicas

pytestmark = pytest.mark.usefixtures("xcore_home")

ALLREDUCE = xcore.testing.allreduce.__file__


def _run(experiment: xm.Experiment, job: xm.Job | xm.JobGroup) -> list:
    experiment.add(job)
    experiment.wait_until_complete()
    [unit] = experiment._store.work_units(experiment.experiment_id)
    return unit.jobs


@pytest.mark.parametrize("framework", ["torch", "jax", "xcore"])
def test_two_replicas_all_reduce_with_only_the_option_set(framework):
    """torch.distributed (gloo, CPU; CI installs torch), jax where installed, and the same
    env:// rendezvous over TCP from the XCORE_* variables."""
    via = xcore.testing.allreduce.expected_via(framework)
    option = xm.Distributed("torch" if framework == "xcore" else framework)
    with xm.create_experiment("allreduce") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=[ALLREDUCE, framework])])
        executor = xlocal.Local(xm.JobRequirements(replicas=2), distributed=option)
        [job] = _run(experiment, xm.Job(exe, executor))
    log = Path(job.log_path).read_text()
    assert job.status is Status.COMPLETED, log
    assert sorted(line for line in log.splitlines() if line.startswith("allreduce")) == [
        f"allreduce rank=0 world=2 sum=3 via={via}", f"allreduce rank=1 world=2 sum=3 via={via}"], log


def test_variables_of_each_framework():
    code = ("import json, os; keys = ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', "
            "'JAX_COORDINATOR_ADDRESS', 'JAX_PROCESS_ID', 'JAX_NUM_PROCESSES', 'TF_CONFIG', 'XCORE_RANK', "
            "'XCORE_WORLD_SIZE', 'XCORE_COORDINATOR']; "
            "os.write(1, (json.dumps({k: os.environ.get(k) for k in keys}) + '\\n').encode())")
    seen = {}
    with xm.create_experiment("vars") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", code])])
        for framework in ("torch", "jax", "tf"):
            executor = xlocal.Local(xm.JobRequirements(replicas=3), distributed=xm.Distributed(framework, port=23456))
            experiment.add(xm.Job(exe, executor, name=framework))
        experiment.wait_until_complete()
        for unit in experiment._store.work_units(experiment.experiment_id):
            [job] = unit.jobs
            assert job.status is Status.COMPLETED
            rows = [json.loads(line) for line in Path(job.log_path).read_text().splitlines()]
            seen[job.name] = sorted(rows, key=lambda r: r["XCORE_RANK"])
    for rows in seen.values():
        assert [(r["XCORE_RANK"], r["XCORE_WORLD_SIZE"], r["XCORE_COORDINATOR"]) for r in rows] == [
            (str(i), "3", "127.0.0.1:23456") for i in range(3)]
    assert [(r["RANK"], r["WORLD_SIZE"], r["LOCAL_RANK"], r["LOCAL_WORLD_SIZE"], r["MASTER_ADDR"])
            for r in seen["torch"]] == [(str(i), "3", str(i), "3", "127.0.0.1") for i in range(3)]
    assert seen["torch"][0]["JAX_PROCESS_ID"] is None and seen["torch"][0]["TF_CONFIG"] is None
    assert [(r["JAX_COORDINATOR_ADDRESS"], r["JAX_PROCESS_ID"], r["JAX_NUM_PROCESSES"]) for r in seen["jax"]] == [
        ("127.0.0.1:23456", str(i), "3") for i in range(3)]
    assert seen["jax"][0]["RANK"] is None
    configs = [json.loads(r["TF_CONFIG"]) for r in seen["tf"]]
    assert configs[2] == {"cluster": {"worker": ["127.0.0.1:23456", "127.0.0.1:23457", "127.0.0.1:23458"]},
                          "task": {"type": "worker", "index": 2}}


def test_one_failed_replica_stops_the_others_and_fails_the_job():
    """A peer that died leaves the others waiting forever in a real program: they are stopped."""
    code = ("import os, sys, time\nif os.environ['RANK'] == '1': sys.exit(3)\ntime.sleep(600)")
    with xm.create_experiment("fail") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", code])])
        executor = xlocal.Local(xm.JobRequirements(replicas=2), distributed="torch")
        [job] = _run(experiment, xm.Job(exe, executor))
    assert job.status is Status.FAILED and job.exit_code == 3


def test_job_group_roles_learn_each_others_hosts():
    # One write per line: the replicas of a job share its log, and an unbuffered print() writes
    # its parts one by one, so two replicas' prints can interleave within a line.
    code = ("import os, sys; sys.stdout.write(os.environ['XCORE_JOB_HOSTS'] + ' ' + "
            "os.environ['XCORE_HOST_ACTOR_1'] + '\\n')")
    with xm.create_experiment("roles") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", code])])
        group = xm.JobGroup(learner=xm.Job(exe, xlocal.Local()),
                            actor_1=xm.Job(exe, xlocal.Local(xm.JobRequirements(replicas=2))))
        jobs = _run(experiment, group)
    assert all(job.status is Status.COMPLETED for job in jobs)
    hosts = {"learner": ["127.0.0.1"], "actor_1": ["127.0.0.1", "127.0.0.1"]}
    lines = Path(jobs[1].log_path).read_text().splitlines()
    assert len(lines) == 2, lines
    assert all(json.loads(line.rsplit(" ", 1)[0]) == hosts for line in lines), lines
    assert Path(jobs[0].log_path).read_text().split()[-1] == "127.0.0.1"


def test_wrapped_argv_reaches_the_program_byte_for_byte():
    tricky = ["a b", "$HOME", "'\"", "", "--", "naïve\nline"]
    argv = replicas.wrap([sys.executable, "-c", "import sys; print(sys.argv[1:])", *tricky], 2, None)
    assert argv[argv.index("--") + 1:] == [sys.executable, "-c", "import sys; print(sys.argv[1:])", *tricky]


def test_distributed_option_is_checked_and_stored():
    with pytest.raises(ValueError, match="one of 'torch', 'jax', 'tf'"):
        xm.Distributed("pytorch")
    with pytest.raises(ValueError, match="TCP port"):
        xm.Distributed("jax", port=0)
    executor = xlocal.Local(distributed="jax")
    assert executor.distributed == xm.Distributed("jax")
    from xcore.hooks.host import get_host

    serializer = get_host().serializer
    data = serializer.dump(xlocal.Local(distributed=xm.Distributed("tf", port=2222)))
    assert data["distributed"] == {"framework": "tf", "port": 2222}
    assert serializer.load(json.loads(json.dumps(data))).distributed == xm.Distributed("tf", port=2222)
