"""JobGroups as gangs and distributed environments on real Slurm (docs/gangs.md): a JobGroup is
ONE allocation whose roles start together as srun steps and learn each other's hosts; a job
with replicas=N runs N tasks with its framework's variables."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import xcore as xm
import xcore.testing.allreduce
from xcore.testing import require_service
from xhpc_helpers import HOW, REMOTE_STAGING, cluster_toml, service_up

pytestmark = pytest.mark.infra("slurm")

ALLREDUCE = xcore.testing.allreduce.__file__

# A learner and its actors must run at the same time: the learner waits for every actor to
# connect and answers each; an actor that started alone would find nobody listening.
PEERS = r"""
import json, os, socket, sys, time
role, port, actors = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hosts = json.loads(os.environ["XCORE_JOB_HOSTS"])
learner = os.environ["XCORE_HOST_LEARNER"]
print("hosts", json.dumps(hosts, sort_keys=True), flush=True)
if role == "learner":
    with socket.create_server((learner, port)) as server:
        server.settimeout(90)
        for _ in range(actors):
            conn, _ = server.accept()
            with conn:
                name = conn.recv(100).decode()
                conn.sendall(f"hello {name}".encode())
                print("met", name, flush=True)
else:
    deadline = time.monotonic() + 90
    while True:
        try:
            conn = socket.create_connection((learner, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with conn:
        conn.sendall(role.encode())
        print(conn.recv(100).decode(), flush=True)
"""


@pytest.fixture
def slurm(xcore_env: Path) -> dict[str, str]:
    """The real Slurm in login-node mode (over SSH: ``slurm_over_ssh``)."""
    require_service("slurm", lambda: service_up("slurm"), HOW)
    staging = str(xcore_env / "staging")
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", "slurm", "local", staging))
    return {"name": "test", "staging": staging}


@pytest.fixture
def slurm_over_ssh(xcore_env: Path) -> Iterator[dict[str, str]]:
    require_service("slurm", lambda: service_up("slurm"), HOW)
    require_service("sshd", lambda: service_up("sshd"), HOW)
    staging = f"{REMOTE_STAGING}/gangs-{uuid.uuid4().hex[:8]}"
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", "slurm", "ssh", staging))
    yield {"name": "test", "staging": staging}
    shutil.rmtree(staging, ignore_errors=True)


def _log(job: object) -> str:
    from xcore.hooks.host import get_host

    host = get_host()
    return "".join(host.job_logs(job.handle_kind, host.serializer.load(job.handle), False))  # type: ignore[attr-defined]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_two_replicas_all_reduce_with_only_the_option_set(slurm: dict[str, str]) -> None:
    """torch.distributed (gloo, CPU): the job runs this venv's Python (login-node mode: same
    machine, same user), where CI installed torch; a job that fell back to TCP fails it."""
    import xhpc

    via = xcore.testing.allreduce.expected_via("torch")

    with xm.create_experiment(title="allreduce") as experiment:
        [exe] = experiment.package([xm.Packageable(
            xhpc.Command([f'exec {sys.executable} {ALLREDUCE} "$@"']), xhpc.Slurm.Spec())])
        executor = xhpc.Slurm(requirements=xm.JobRequirements(replicas=2), distributed=xm.Distributed("torch"))
        experiment.add(xm.Job(exe, executor, args=["torch"]))
    [job] = experiment.wait_until_complete(timeout=150)
    log = _log(job)
    assert job.status is xm.Status.COMPLETED, log
    lines = sorted(line for line in log.splitlines() if line.startswith("allreduce"))
    assert lines == [f"allreduce rank=0 world=2 sum=3 via={via}", f"allreduce rank=1 world=2 sum=3 via={via}"], log


def test_a_sweep_of_replicated_jobs_is_still_one_array(slurm: dict[str, str]) -> None:
    """Each array task is an allocation of N tasks, with its own coordinator port."""
    import xhpc

    via = xcore.testing.allreduce.expected_via("jax")

    with xm.create_experiment(title="sweep") as experiment:
        [exe] = experiment.package([xm.Packageable(
            xhpc.Command([f'exec {sys.executable} {ALLREDUCE} "$@"']), xhpc.Slurm.Spec())])
        executor = xhpc.Slurm(requirements=xm.JobRequirements(replicas=2), distributed="jax")
        for _ in range(3):
            experiment.add(xm.Job(exe, executor, args=["jax"]))
    jobs = experiment.wait_until_complete(timeout=150)
    assert len({job.handle["job_id"] for job in jobs}) == 1, "one array submission"
    for job in jobs:
        log = _log(job)
        assert job.status is xm.Status.COMPLETED, log
        assert sorted(line for line in log.splitlines() if line.startswith("allreduce")) == [
            f"allreduce rank=0 world=2 sum=3 via={via}", f"allreduce rank=1 world=2 sum=3 via={via}"], log


def test_variables_of_each_framework(slurm: dict[str, str]) -> None:
    import xhpc

    code = ("import json, os; keys = ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', "
            "'MASTER_PORT', 'JAX_COORDINATOR_ADDRESS', 'JAX_PROCESS_ID', 'JAX_NUM_PROCESSES', 'TF_CONFIG', "
            "'XCORE_RANK', 'XCORE_WORLD_SIZE']; "
            "os.write(1, (json.dumps({k: os.environ.get(k) for k in keys}) + '\\n').encode())")
    with xm.create_experiment(title="vars") as experiment:
        [exe] = experiment.package([xm.Packageable(
            xhpc.Command([f'exec {sys.executable} -c "$@"']), xhpc.Slurm.Spec())])
        for framework in ("torch", "jax", "tf"):
            executor = xhpc.Slurm(requirements=xm.JobRequirements(replicas=2),
                                  distributed=xm.Distributed(framework, port=24680))
            experiment.add(xm.Job(exe, executor, args=[code], name=framework))
    jobs = experiment.wait_until_complete(timeout=150)
    seen = {}
    for job in jobs:
        log = _log(job)
        assert job.status is xm.Status.COMPLETED, log
        rows = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
        assert len(rows) == 2, log
        seen[job.name] = sorted(rows, key=lambda row: row["XCORE_RANK"])
    assert [(r["RANK"], r["WORLD_SIZE"], r["LOCAL_RANK"], r["LOCAL_WORLD_SIZE"], r["MASTER_ADDR"], r["MASTER_PORT"])
            for r in seen["torch"]] == [(str(i), "2", str(i), "2", "localhost", "24680") for i in range(2)]
    assert [(r["JAX_COORDINATOR_ADDRESS"], r["JAX_PROCESS_ID"], r["JAX_NUM_PROCESSES"]) for r in seen["jax"]] == [
        ("localhost:24680", str(i), "2") for i in range(2)]
    assert seen["jax"][0]["RANK"] is None and seen["torch"][0]["TF_CONFIG"] is None
    assert json.loads(seen["tf"][1]["TF_CONFIG"]) == {
        "cluster": {"worker": ["localhost:24680", "localhost:24681"]}, "task": {"type": "worker", "index": 1}}


@pytest.mark.parametrize("mode", ["login", "ssh"])
def test_learner_and_two_actors_start_together_and_meet(mode: str, request: pytest.FixtureRequest) -> None:
    """One submission for the whole JobGroup; the actors reach the learner by its role's host."""
    import xhpc

    request.getfixturevalue("slurm" if mode == "login" else "slurm_over_ssh")
    python = sys.executable if mode == "login" else "python3"  # the cluster's user cannot read this venv
    port = _free_port()
    with xm.create_experiment(title="gang") as experiment:
        [exe] = experiment.package([xm.Packageable(
            xhpc.Command([f'exec {python} -c "$@"']), xhpc.Slurm.Spec())])
        group = xm.JobGroup(**{role: xm.Job(exe, xhpc.Slurm(), args=[PEERS, role, str(port), "2"])
                               for role in ("learner", "actor_1", "actor_2")})
        experiment.add(group)
    jobs = experiment.wait_until_complete(timeout=150)
    logs = {job.name: _log(job) for job in jobs}
    assert all(job.status is xm.Status.COMPLETED for job in jobs), logs
    assert len({json.dumps(job.handle["job_id"]) for job in jobs}) == 1, "a gang is ONE submission"
    hosts = {"actor_1": ["localhost"], "actor_2": ["localhost"], "learner": ["localhost"]}
    for log in logs.values():
        assert f"hosts {json.dumps(hosts, sort_keys=True)}" in log
    assert sorted(line for line in logs["learner"].splitlines() if line.startswith("met")) == [
        "met actor_1", "met actor_2"]
    assert "hello actor_2" in logs["actor_2"]


def test_a_gang_too_big_for_the_cluster_never_starts(slurm: dict[str, str]) -> None:
    """Each role alone fits the 8-CPU node, the three together (12 CPUs) do not: none starts,
    and the user is told why (this Slurm refuses the allocation; one that queued it would
    leave it pending, never start a part of it)."""
    import xhpc
    from xcore.errors import ExperimentUnitError

    with pytest.raises(ExperimentUnitError, match="More processors requested than permitted.*ONE allocation"):
        with xm.create_experiment(title="toobig") as experiment:
            [exe] = experiment.package([xm.Packageable(xhpc.Command(['echo "started $1"']), xhpc.Slurm.Spec())])
            group = xm.JobGroup(**{role: xm.Job(exe, xhpc.Slurm(requirements=xm.JobRequirements(cpu=4)),
                                                args=[role]) for role in ("learner", "actor_1", "actor_2")})
            experiment.add(group)
    jobs = experiment._store.work_units(experiment.experiment_id)[0].jobs
    assert [job.status for job in jobs] == [xm.Status.FAILED] * 3
    assert all("More processors requested" in job.message and "ONE allocation" in job.message for job in jobs), \
        jobs[0].message
    assert not list(Path(slurm["staging"]).glob("runs/*/logs/*.log")), "no role may have started"

    # Each role alone fits: the same three as separate work units all run.
    with xm.create_experiment(title="fits") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(['echo "started $1"']), xhpc.Slurm.Spec())])
        for role in ("learner", "actor_1", "actor_2"):
            experiment.add(xm.Job(exe, xhpc.Slurm(requirements=xm.JobRequirements(cpu=4)), args=[role]))
    assert all(job.status is xm.Status.COMPLETED for job in experiment.wait_until_complete(timeout=150))


def test_generated_gang_script_is_valid_bash(slurm: dict[str, str], tmp_path: Path) -> None:
    import xhpc
    from xhpc import scripts

    roles = [scripts.role_of(xhpc.Slurm(requirements=xm.JobRequirements(cpu=2, replicas=2), distributed="tf"),
                             "learner", 0),
             scripts.role_of(xhpc.Slurm(), "actor-1", 1)]
    text = scripts.launcher_script(xhpc.Slurm(), "gang", "/tmp/run dir", roles)
    assert "--ntasks=3" in text and "--cpus-per-task=2" in text and "XHPC_VARS=(LEARNER ACTOR_1)" in text
    for name, script in (("job.sh", text), ("role.sh", scripts.role_script(xhpc.Slurm(), "/tmp/r", [0, 1, 2]))):
        path = tmp_path / name
        path.write_text(script)
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, script


def test_cancelling_a_running_gang_cancels_every_role(slurm: dict[str, str]) -> None:
    """A gang lives and ends as one: stopping its work unit cancels every role's tasks."""
    import time

    import xhpc

    with xm.create_experiment(title="stop") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(['echo "up $1"; exec sleep 300']),
                                                   xhpc.Slurm.Spec())])
        experiment.add(xm.JobGroup(**{role: xm.Job(exe, xhpc.Slurm(), args=[role]) for role in ("learner", "actor")}))
    unit = xm.get_experiment(experiment.experiment_id).work_units[1]
    deadline = time.monotonic() + 120
    while unit.get_status().status is not xm.Status.RUNNING:
        assert time.monotonic() < deadline, unit.get_status()
        time.sleep(0.5)
    logs = Path(slurm["staging"]).glob("runs/*/logs/*.log")
    while sorted(p.read_text() for p in logs) != ["up actor\n", "up learner\n"]:  # both roles run at once
        assert time.monotonic() < deadline
        time.sleep(0.5)
        logs = Path(slurm["staging"]).glob("runs/*/logs/*.log")
    unit.stop()
    jobs = experiment.wait_until_complete(timeout=120)
    assert [job.status for job in jobs] == [xm.Status.CANCELLED] * 2, [(j.status, j.message) for j in jobs]


def test_each_role_reads_how_it_ended(slurm: dict[str, str]) -> None:
    """A role's own step says how it ended: the one that failed reads FAILED with its exit code,
    the one stopped for it CANCELLED with why, and a role that finished early COMPLETED."""
    import xhpc

    with xm.create_experiment(title="roles") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(['case "$1" in done) exit 0;; bad) sleep 2; exit 3;; '
                                                                 '*) exec sleep 300;; esac']), xhpc.Slurm.Spec())])
        experiment.add(xm.JobGroup(**{role: xm.Job(exe, xhpc.Slurm(), args=[role])
                                      for role in ("done", "bad", "wait")}))
    jobs = {job.name: job for job in experiment.wait_until_complete(timeout=150)}
    assert (jobs["done"].status, jobs["done"].exit_code) == (xm.Status.COMPLETED, 0)
    assert (jobs["bad"].status, jobs["bad"].exit_code) == (xm.Status.FAILED, 3), jobs["bad"].message
    assert jobs["wait"].status is xm.Status.CANCELLED, (jobs["wait"].status, jobs["wait"].message)
    assert jobs["wait"].message == "stopped: another job of its gang failed"


ADOPT = r"""
import os, time
from pathlib import Path
import xcore as xm
import xhpc
import xhpc.launch

ctl = Path(os.environ["FI_CTL"])
real_launch = xhpc.launch.launch

def paused_launch(requests, context):
    handles = real_launch(requests, context)  # sbatch ran; the launcher has not recorded it yet
    (ctl / "in-flight").write_text("1")
    while True:
        time.sleep(1)

xhpc.launch.launch = paused_launch
with xm.create_experiment(title="killed while submitting a gang") as experiment:
    (ctl / "experiment").write_text(str(experiment.experiment_id))
    [exe] = experiment.package([xm.Packageable(xhpc.Command(['echo "role $1"']), xhpc.Slurm.Spec())])
    experiment.add(xm.JobGroup(learner=xm.Job(exe, xhpc.Slurm(), args=["learner"]),
                               actor=xm.Job(exe, xhpc.Slurm(), args=["actor"])))
"""


def test_a_gang_whose_launcher_died_is_adopted_as_a_gang(slurm: dict[str, str], xcore_env: Path) -> None:
    """The next command finds the submitted gang and tracks each role as the whole job."""
    import os
    import sqlite3
    import time

    ctl = xcore_env / "ctl"
    ctl.mkdir()
    script = xcore_env / "launch.py"
    script.write_text(ADOPT)
    launcher = subprocess.Popen([sys.executable, "-m", "xcore.cli.main", "launch", str(script)],
                                env={**os.environ, "FI_CTL": str(ctl), "XCORE_QUIET": "1"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (ctl / "in-flight").exists():
        assert launcher.poll() is None, launcher.communicate()
        assert time.monotonic() < deadline, "the launcher never submitted"
        time.sleep(0.05)
    launcher.kill()
    launcher.wait()
    experiment = (ctl / "experiment").read_text()
    waited = subprocess.run([sys.executable, "-m", "xcore.cli.main", "wait", experiment, "--timeout", "150"],
                            capture_output=True, text=True, timeout=200, check=False)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    db = sqlite3.connect(xcore_env / "home" / "xcore.db")
    handles = [json.loads(h) for (h,) in db.execute("SELECT handle FROM jobs WHERE experiment_id = ?",
                                                    (int(experiment),))]
    db.close()
    assert [(h["task"], h["index"]) for h in handles] == [(-1, 0), (-1, 1)]
    assert len({h["job_id"] for h in handles}) == 1


def test_any_role_name_reaches_the_roles_as_json(slurm: dict[str, str]) -> None:
    """JobGroup keys filled by item may hold quotes or spaces: XCORE_JOB_HOSTS stays valid JSON."""
    import xhpc

    with xm.create_experiment(title="names") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(['printf "%s\\n" "$XCORE_JOB_HOSTS"']),
                                                   xhpc.Slurm.Spec())])
        group = xm.JobGroup()
        for name in ('say "hi"', "back\\slash", "ünï"):
            group.jobs[name] = xm.Job(exe, xhpc.Slurm())
        experiment.add(group)
    jobs = experiment.wait_until_complete(timeout=150)
    assert all(job.status is xm.Status.COMPLETED for job in jobs)
    assert json.loads(_log(jobs[0]).strip()) == {'say "hi"': ["localhost"], "back\\slash": ["localhost"],
                                                 "ünï": ["localhost"]}


def test_a_replicated_distributed_role_inside_a_gang(slurm: dict[str, str]) -> None:
    """A gang's role with replicas gets its own ranks and coordinator; the others see its hosts."""
    import xhpc

    with xm.create_experiment(title="mixed") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command([f'exec {sys.executable} "$@"']),
                                                   xhpc.Slurm.Spec())])
        via = xcore.testing.allreduce.expected_via("torch")
        trainer = xhpc.Slurm(requirements=xm.JobRequirements(replicas=2), distributed="torch")
        experiment.add(xm.JobGroup(
            sidecar=xm.Job(exe, xhpc.Slurm(), args=["-c", "import os; print(os.environ['XCORE_JOB_HOSTS'])"]),
            trainer=xm.Job(exe, trainer, args=[ALLREDUCE, "torch"])))
    jobs = {job.name: job for job in experiment.wait_until_complete(timeout=150)}
    logs = {name: _log(job) for name, job in jobs.items()}
    assert all(job.status is xm.Status.COMPLETED for job in jobs.values()), logs
    assert json.loads(logs["sidecar"]) == {"sidecar": ["localhost"], "trainer": ["localhost", "localhost"]}
    assert sorted(line for line in logs["trainer"].splitlines() if line.startswith("allreduce")) == [
        f"allreduce rank=0 world=2 sum=3 via={via}", f"allreduce rank=1 world=2 sum=3 via={via}"], logs["trainer"]
