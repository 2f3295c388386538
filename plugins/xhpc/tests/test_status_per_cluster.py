"""A status poll of many experiments' tasks sends one scheduler command per cluster, whatever
the number of experiments (issue 31: `xcore watch` polls every active experiment at once)."""

from __future__ import annotations

import time

from xhpc import tracking
from xhpc.handles import GridEngineHandle, SlurmHandle
from xhpc.transport import Result


class _Recording:
    """A transport that records the commands it is given; the scheduler lists no job."""

    def __init__(self, cluster: str, sent: list[tuple[str, str]]) -> None:
        self.cluster, self.sent = cluster, sent

    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None) -> Result:
        self.sent.append((self.cluster, command))
        return Result(0, b"", b"")


def test_fifty_experiments_on_three_clusters_are_three_queries(monkeypatch) -> None:
    sent: list[tuple[str, str]] = []
    monkeypatch.setattr(tracking, "_transport", lambda handle: _Recording(handle.cluster, sent))
    now, handles = time.time(), []
    for experiment in range(50):  # each experiment its own array job and run directory
        kind, cluster = [(SlurmHandle, "ssh"), (SlurmHandle, "login"), (GridEngineHandle, "sge")][experiment % 3]
        handles += [kind(cluster=cluster, job_id=str(1000 + experiment), task=task, index=task,
                         run_dir=f"/runs/{experiment}", local=cluster == "login", submitted_at=now)
                    for task in range(20)]
    states = tracking.states(handles)
    assert len(states) == 1000 and {s.message for s in states} == {"pending: submitted"}
    assert sorted(cluster for cluster, _ in sent) == ["login", "sge", "ssh"]
    for cluster, command in sent:  # each cluster's one command names every array job on it
        mine = {h.job_id for h in handles if h.cluster == cluster}
        assert all(job_id in command for job_id in mine)
