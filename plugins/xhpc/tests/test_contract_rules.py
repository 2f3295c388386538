"""xhpc keeps the plugin contract's written rules (docs/plugins.md, section 6) where the
shared contract suite cannot reach on a shared cluster: the one exit/signal wording for both
schedulers' accounting records, and a job the scheduler forgot reads ``lost: ...``."""

from __future__ import annotations

import time
import types

from xcore.plugin import Status
from xhpc import tracking
from xhpc.handles import GridEngineHandle, SlurmHandle
from xhpc.schedulers import GridEngineScheduler, SlurmScheduler


def test_slurm_words_exits_and_signals_by_the_one_convention():
    killed = SlurmScheduler._final("FAILED", "FAILED", "0:9", 1.0, 2.0)
    assert killed is not None and (killed.message, killed.exit_code) == ("killed by signal 9 (SIGKILL)", 137)
    exited = SlurmScheduler._final("FAILED", "FAILED", "137:0", 1.0, 2.0)  # the program itself exited 137
    assert exited is not None and (exited.message, exited.exit_code) == ("exit code 137", 137)


def test_grid_engine_words_a_signal_by_the_one_convention():
    killed = GridEngineScheduler._final({"failed": "0", "exit_status": "137"})
    assert (killed.status, killed.message, killed.exit_code) == (Status.FAILED, "killed by signal 9 (SIGKILL)", 137)
    qdel = GridEngineScheduler._final({"failed": "100 : assumedly after job", "exit_status": "143"})
    assert qdel.message == "killed by signal 15 (SIGTERM)"
    assert GridEngineScheduler._final({"failed": "0", "exit_status": "3"}).message == "exit code 3"


class _SchedulerWithNoRecords:
    """A cluster whose scheduler answers every query with nothing (records purged)."""

    def run(self, command: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(out="", stdout=b"", err="", returncode=0)


def test_a_job_the_scheduler_forgot_reads_lost(monkeypatch):
    monkeypatch.setattr(tracking, "_transport", lambda handle: _SchedulerWithNoRecords())
    old = time.time() - 3600
    handles = [SlurmHandle("c", "77", 1, 0, "/run", log_path="/run/logs/0.log", submitted_at=old),
               GridEngineHandle("c", "78", 1, 0, "/run", log_path="/run/logs/0.log", submitted_at=old)]
    for handle, scheduler in zip(handles, ("slurm", "sge"), strict=True):
        [state], outage = tracking._query([handle], scheduler)
        assert state is not None and outage is None
        assert (state.status, state.exit_code) == (Status.FAILED, None)
        assert state.message.startswith("lost: ") and "no longer known" in state.message
    just_submitted = SlurmHandle("c", "79", 1, 0, "/run", log_path="/run/logs/0.log", submitted_at=time.time())
    [state], _ = tracking._query([just_submitted], "slurm")
    assert state is not None and state.status is Status.PENDING  # accounting may lag
