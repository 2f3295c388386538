"""Faults during submission, on the real Slurm over SSH: never a duplicate, never unrecorded."""

from __future__ import annotations

import glob
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import require_service
from xhpc import transport
from xhpc.transport import ClusterConnectionError
from xhpc_helpers import HOW, REMOTE_STAGING, LinkProxy, cluster_toml, service_up


@pytest.fixture
def slurm_ssh(xcore_env: Path) -> str:
    require_service("slurm", lambda: service_up("slurm"), HOW)
    require_service("sshd", lambda: service_up("sshd"), HOW)
    staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    (xcore_env / "config" / "clusters.toml").write_text(cluster_toml("test", "slurm", "ssh", staging))
    return staging


def _drop_after_submit(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """The submit command runs on the cluster, then the connection 'drops' before the reply."""
    real = transport.SSHTransport.run
    dropped = [0, times]

    def run(self, command, stdin=None, timeout=None):  # type: ignore[no-untyped-def]
        result = real(self, command, stdin, timeout)
        if "sbatch" in command and dropped[0] < dropped[1]:
            dropped[0] += 1
            self._drop()
            raise ClusterConnectionError("simulated drop after sbatch", retryable=True)
        return result

    monkeypatch.setattr(transport.SSHTransport, "run", run)
    monkeypatch.setattr(transport.time, "sleep", lambda s: None)
    return dropped


def _count_jobs(name: str) -> int:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "--name", name, "-S", "now-1hour", "-o", "JobID"],
                         capture_output=True, text=True).stdout
    squeue = subprocess.run(["squeue", "-h", "-t", "all", "--name", name, "-o", "%F"], capture_output=True,
                            text=True).stdout
    return len({line.split("_")[0] for line in (out + squeue).split() if line})


def test_dropped_reply_is_retried_without_duplicate(slurm_ssh: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import xhpc

    dropped = _drop_after_submit(monkeypatch, times=1)
    name = f"drop{uuid.uuid4().hex[:8]}"
    with xm.create_experiment(title=name) as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        for _ in range(3):
            experiment.add(xm.Job(exe, xhpc.Slurm(job_name=name)))
    assert dropped[0] == 1
    jobs = experiment.wait_until_complete(timeout=60)
    assert all(j.status is xm.Status.COMPLETED for j in jobs)
    assert len({j.handle["job_id"] for j in jobs}) == 1
    assert _count_jobs(name) == 1  # the retry found the submitted job instead of submitting again


def test_reply_lost_for_good_is_recovered_by_status(slurm_ssh: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import xhpc

    control = _drop_after_submit(monkeypatch, times=100)
    name = f"lost{uuid.uuid4().hex[:8]}"
    with xm.create_experiment(title=name) as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, xhpc.Slurm(job_name=name)))
    control[1] = 0  # the connection works again
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.handle["job_id"] == ""  # recorded as launched, id unknown at launch time...
    assert job.status is xm.Status.COMPLETED  # ...and found from chunk-0.id by the status hook
    assert _count_jobs(name) == 1


def test_unknown_host_key_is_refused(xcore_env: Path, tmp_path: Path) -> None:
    require_service("sshd", lambda: service_up("sshd"), HOW)
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "slurm", "ssh", "/tmp/x").replace(
            "/var/lib/xcore-infra/ssh/known_hosts", str(empty)))
    out = subprocess.run([sys.executable, "-m", "xcore.cli.main", "cluster", "check", "test"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1
    assert "host key" in out.stdout and "ssh-keyscan" in out.stdout


def test_cluster_check_ok(slurm_ssh: str) -> None:
    out = subprocess.run([sys.executable, "-m", "xcore.cli.main", "cluster", "check", "test"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("ok ") == 3


# -- a real dropped link in the middle of a chunked submission -------------------------------

def _present(scheduler: str, name: str) -> set[tuple[str, int]]:
    """(array job, task) of every task in the scheduler under the test's own job name."""
    if scheduler == "slurm":
        out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "--name", name, "-o", "%F|%K"],
                             capture_output=True, text=True, timeout=30, check=False).stdout
        return {(job, int(task)) for job, task in (line.split("|") for line in out.split())}
    out = subprocess.run(["qstat", "-xml", "-g", "d", "-u", "*"], capture_output=True, text=True, timeout=30,
                         check=False).stdout
    found = set()
    for job in ET.fromstring(out).iter("job_list"):
        if (job.findtext("JB_name") or "") == name:
            found.add(((job.findtext("JB_job_number") or "").strip(), int((job.findtext("tasks") or "1").strip())))
    return found


def _settled(scheduler: str, name: str, quiet: float = 2.0, deadline: float = 30.0) -> set[tuple[str, int]]:
    """What the scheduler holds once nothing new has appeared for ``quiet`` seconds (a first
    attempt may still be submitting after the launch returned)."""
    end = time.monotonic() + deadline
    last, since = _present(scheduler, name), time.monotonic()
    while time.monotonic() < end and time.monotonic() - since < quiet:
        time.sleep(0.25)
        now = _present(scheduler, name)
        if now != last:
            last, since = now, time.monotonic()
    return last


def _cancel_ids(scheduler: str, job_ids: set[str]) -> None:
    for i in range(0, len(job_ids), 200):
        batch = sorted(job_ids)[i:i + 200]
        if batch:
            subprocess.run(["scancel" if scheduler == "slurm" else "qdel", *batch], capture_output=True, timeout=60,
                           check=False)


@pytest.mark.parametrize("scheduler,tasks", [("slurm", 500), ("sge", 60)])
def test_link_cut_mid_submission_neither_duplicates_nor_loses(
        xcore_env: Path, tmp_path: Path, scheduler: str, tasks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SSH link is cut for real (a relay in front of sshd closes both sockets) while the
    cluster-side loop is part-way through submitting chunks of 2 tasks; the launcher reconnects
    and retries. Every chunk must be in the scheduler exactly once and recorded in the store.

    The cluster-side loop waits before chunk ``cut_after`` until the link is cut (a gate file the
    test creates right after the cut): on a loaded machine the whole loop could otherwise end
    before the cut, and the test would cut an idle link."""
    import xhpc
    from xhpc import schedulers

    require_service(scheduler, lambda: service_up(scheduler), HOW)
    require_service("sshd", lambda: service_up("sshd"), HOW)
    proxy = LinkProxy()
    staging = f"{REMOTE_STAGING}/test-{uuid.uuid4().hex[:8]}"
    known = proxy.known_hosts(tmp_path / "known_hosts")
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", scheduler, "ssh", staging, max_array_size=2)
        .replace("port = 2222", f"port = {proxy.port}")
        .replace("/var/lib/xcore-infra/ssh/known_hosts", str(known)))
    name = f"cut{uuid.uuid4().hex[:8]}"
    chunks = tasks // 2
    cut_after = 3  # chunks submitted before the link goes down
    injected: dict[str, object] = {}
    gate = f"{staging}/cut-done"
    scheduler_class = schedulers.SlurmScheduler if scheduler == "slurm" else schedulers.GridEngineScheduler
    submit_command = scheduler_class.submit_command

    def gated(self: object, script: str, chunk: schedulers.Chunk, max_parallel: int | None, *more: object) -> str:
        command = submit_command(self, script, chunk, max_parallel, *more)  # type: ignore[arg-type]
        if chunk.index != cut_after:
            return command
        return f"{{ while [ ! -e {gate} ]; do sleep 0.05; done; {command}; }}"

    monkeypatch.setattr(scheduler_class, "submit_command", gated)

    def cut_when_submitting() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            done = glob.glob(f"{staging}/runs/*/chunk-*.id")
            if len(done) >= cut_after:
                proxy.cut()
                injected.update(cut_at_chunk_ids=len(done), connections_before=proxy.connections)
                Path(gate).touch()  # the cluster-side loop goes on only now
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=cut_when_submitting, daemon=True)
    watcher.start()
    Ex = xhpc.Slurm if scheduler == "slurm" else xhpc.GridEngine
    hold = ["--hold"] if scheduler == "slurm" else ["-h"]  # held: nothing runs, nothing to wait for
    try:
        with xm.create_experiment(title=name) as experiment:
            [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), Ex.Spec())])
            for i in range(tasks):
                experiment.add(xm.Job(exe, Ex(job_name=name, directives=hold), args=[str(i)]))
        watcher.join(5)
        handles = [j.handle for j in experiment._all_jobs()]
        recorded = {(h["job_id"], h["task"]) for h in handles if h and h["job_id"]}
        unrecorded_handles = sum(1 for h in handles if not h or not h["job_id"])
        present = _settled(scheduler, name)
        arrays = {job for job, _ in present}
        report = {
            "injected": {**injected, "cuts": proxy.cuts, "connections": proxy.connections},
            "expected": {"arrays": chunks, "tasks": tasks},
            "in_scheduler": {"arrays": len(arrays), "tasks": len(present)},
            "recorded": {"arrays": len({j for j, _ in recorded}), "tasks": len(recorded),
                         "without_job_id": unrecorded_handles},
            "duplicate_arrays": max(0, len(arrays) - chunks),
            "unknown_to_xcore": len(present - recorded),
            "lost": len(recorded - present) + unrecorded_handles,
        }
        print(f"\nlink-cut fault injection ({scheduler}): {report}")
        assert injected, f"the link was never cut: {report}"
        assert proxy.connections >= 2, f"the launcher did not reconnect: {report}"
        assert report["duplicate_arrays"] == 0 and len(arrays) == chunks, report
        assert report["unknown_to_xcore"] == 0, report
        assert report["lost"] == 0 and len(present) == tasks, report
    finally:
        proxy.close()
        _cancel_ids(scheduler, {job for job, _ in _present(scheduler, name)})


def test_refused_submission_with_lost_reply_reads_failed_at_once(slurm_ssh: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler refused the chunk and the reply was lost: status reads the refusal from
    chunk-K.err instead of "confirming submission" for minutes."""
    import xhpc

    control = _drop_after_submit(monkeypatch, times=100)
    with xm.create_experiment(title="refused") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.Slurm.Spec())])
        experiment.add(xm.Job(exe, xhpc.Slurm(partition=f"nosuch{uuid.uuid4().hex[:6]}")))
    control[1] = 0
    [job] = experiment.wait_until_complete(timeout=30)
    assert job.handle["job_id"] == ""
    assert job.status is xm.Status.FAILED
    assert "submission failed" in job.message and "partition" in job.message.lower(), job.message
