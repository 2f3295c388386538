"""Fault injection against real processes: a killed launcher, an unusable store, a full disk,
Ctrl-C/SIGTERM during a launch, and concurrent waiters.

Every scenario runs the real CLI (``xcore launch``) on a real launch script whose jobs are
real local processes (xlocal). The script pauses the launcher right after the backend
accepted a batch (the runner is started, nothing recorded yet), so each fault lands at the
worst moment, every time. Each test prints and asserts a report: units recorded, jobs the
backend got (read from the runner's own batch files), adopted, marked failed, lost, exit codes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from xlocal_helpers import run_xcore

pytestmark = pytest.mark.usefixtures("xcore_home")  # the isolation the core's tests get from conftest

N = 30  # units per group: A (launched and recorded), B (in flight at the fault), C (queued)

# Each job claims its unit's marker with O_EXCL: a unit that ran twice fails (exit 1).
JOB = (
    "import os, sys, time; time.sleep(float(os.environ.get('FI_JOB_SLEEP', '0'))); "
    "u = sys.argv[1].split('=')[1]; "
    "os.close(os.open(os.path.join(os.environ['FI_RAN'], u), os.O_CREAT | os.O_EXCL | os.O_WRONLY)); "
    "print('ran', u, flush=True); time.sleep(float(os.environ.get('FI_JOB_HOLD', '0'))); "
    "sys.exit(3 if u in os.environ.get('FI_FAIL', '').split(',') else 0)"
)

SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, time
    from pathlib import Path
    import xcore as xm
    import xlocal
    import xlocal.processes as processes

    ctl = Path(os.environ["FI_CTL"])
    N = int(os.environ["FI_N"])
    mode = os.environ["FI_MODE"]
    real_launch = processes.launch

    def paused_launch(requests, context):
        # The real backend call; then, for group B, stop before the launcher records it.
        handles = real_launch(requests, context)
        if requests[0].work_unit_id > N and not (ctl / "in-flight").exists():
            (ctl / "in-flight").write_text(" ".join(str(r.job_id) for r in requests))
            while not (ctl / "go").exists():
                time.sleep(0.02)
        return handles

    processes.launch = paused_launch

    with xm.create_experiment("fault injection") as experiment:
        (ctl / "experiment").write_text(str(experiment.experiment_id))
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", os.environ["FI_JOB"]])])
        executor = xlocal.Local()

        def add(i):
            return experiment.add(xm.Job(exe, executor, args={"unit": i}), identity=f"u{i}")

        group_a = [add(i) for i in range(1, N + 1)]
        group_a[-1].result()  # A: submitted and recorded
        group_b = [add(i) for i in range(N + 1, 2 * N + 1)]

        def wait_b():  # B: handed to the backend now (by a thread that waits for it), paused before its record
            try:
                group_b[-1].result()
            except Exception as exc:
                print(f"script: group B: {exc}", file=sys.stderr)

        threading.Thread(target=wait_b, daemon=True).start()
        while not (ctl / "in-flight").exists():
            time.sleep(0.02)
        if mode.startswith("store") or mode == "disk":
            (ctl / "ready").write_text("1")
            wait_b()
            (ctl / "b-done").write_text("1")
            while mode == "store-late" and not (ctl / "released").exists():
                time.sleep(0.02)  # leave the `with` block once the store works again
        else:
            group_c = [add(i) for i in range(2 * N + 1, 3 * N + 1)]  # C: queued behind B
            while len(experiment._store.work_units(experiment.experiment_id)) < 3 * N:
                time.sleep(0.02)  # C's group committed (by age, XCORE_RECORD_MAX_AGE), its jobs queued
            (ctl / "ready").write_text("1")
            time.sleep(600)
    """
)

LOCKER = textwrap.dedent(
    """
    import sqlite3, sys, time, os
    db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
    db.execute("BEGIN EXCLUSIVE")
    open(sys.argv[2], "w").close()
    hold = float(sys.argv[3])
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline and not os.path.exists(sys.argv[4]):
        time.sleep(0.02)
    db.execute("ROLLBACK")
    """
)


def _interruptible() -> None:
    """The launcher gets Ctrl-C as from a terminal. A test run started in the background by a
    non-interactive shell (`cmd &`, as CI runners may) ignores SIGINT, and a child inherits that:
    its Python would never raise KeyboardInterrupt and the Ctrl-C scenario would wait forever."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Scenario:
    """One launch of SCRIPT with its control directory, environment and the store it writes."""

    def __init__(self, tmp_path: Path, home: Path, mode: str, store_url: str | None = None, **env: str) -> None:
        self.store_url = store_url  # XCORE_STORE for every command (None: the SQLite file in ``home``)
        self.ctl = tmp_path / "ctl"
        self.ran = tmp_path / "ran"
        self.ctl.mkdir()
        self.ran.mkdir()
        self.home = home
        self.script = tmp_path / "launch.py"
        self.script.write_text(SCRIPT)
        self.env = {
            **os.environ, "XCORE_HOME": str(home), "FI_CTL": str(self.ctl), "FI_N": str(N), "FI_MODE": mode,
            "FI_JOB": JOB, "FI_RAN": str(self.ran), "XCORE_BATCH_MAX_AGE": "60", "XCORE_QUIET": "1",
            "XLOCAL_SLOTS": "16", "PYTHONFAULTHANDLER": "1", **self.store_env, **env,
        }
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> subprocess.Popen[str]:
        self.proc = subprocess.Popen([sys.executable, "-m", "xcore.cli.main", "launch", str(self.script)],
                                     env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=self.ctl, preexec_fn=_interruptible)
        return self.proc

    def wait_for(self, name: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not (self.ctl / name).exists():
            assert self.proc is None or self.proc.poll() is None, f"launcher exited early: {self.proc.communicate()}"
            assert time.monotonic() < deadline, f"no {name} marker after {timeout} s"
            time.sleep(0.02)

    def go(self) -> None:
        (self.ctl / "go").touch()

    def finish(self, timeout: float = 60) -> tuple[int, str, float]:
        """Exit code, stderr and seconds until the launcher exited (it must, within ``timeout``)."""
        assert self.proc is not None
        started = time.monotonic()
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack goes to stderr
            try:
                _, err = self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                _, err = self.proc.communicate()
            pytest.fail(f"xcore launch hung: still running {timeout} s after the fault. stderr:\n{err[-6000:]}")
        return self.proc.returncode, err, time.monotonic() - started

    @property
    def store_env(self) -> dict[str, str]:
        return {"XCORE_STORE": self.store_url} if self.store_url else {}

    @property
    def experiment(self) -> int:
        return int((self.ctl / "experiment").read_text())

    def xcore(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_xcore(*args, env={"XCORE_HOME": str(self.home), "FI_RAN": str(self.ran), "FI_JOB": JOB,
                                     **self.store_env}, timeout=timeout)

    def jobs(self) -> list[Any]:
        """The experiment's job rows, read straight from the store's table."""
        query = "SELECT id, work_unit_id, status, message, handle FROM jobs WHERE experiment_id = {} ORDER BY id"
        if self.store_url:
            import psycopg
            from psycopg.rows import dict_row

            with psycopg.connect(self.store_url, row_factory=dict_row) as conn:
                return conn.execute(query.format("%s"), (self.experiment,)).fetchall()
        db = sqlite3.connect(self.home / "xcore.db")
        db.row_factory = sqlite3.Row
        try:
            return db.execute(query.format("?"), (self.experiment,)).fetchall()
        finally:
            db.close()

    def backend_jobs(self) -> set[tuple[str, int]]:
        """Jobs the xlocal backend got, as (run directory, index): every job of a batch a runner took."""
        found: set[tuple[str, int]] = set()
        for batch in (self.home / "plugins" / "xlocal" / "runs").glob("*/batch.json"):
            if (batch.parent / "runner.json").exists():
                found |= {(str(batch.parent), i) for i in range(len(json.loads(batch.read_text())["jobs"]))}
        return found

    def report(self, injected: str, **extra: object) -> dict[str, object]:
        jobs = self.jobs()
        handles = [json.loads(j["handle"]) for j in jobs if j["handle"] is not None]
        recorded = {(h["run_dir"], h["index"]) for h in handles}
        backend = self.backend_jobs()
        report: dict[str, object] = {
            "injected": injected,
            "units recorded": len({j["work_unit_id"] for j in jobs}),
            "jobs submitted to the backend": len(backend),
            "jobs recorded with a handle": len(recorded),
            "marked failed to launch": sum(j["handle"] is None and j["status"] == "FAILED" for j in jobs),
            "marked interrupted": sum(j["status"] == "CANCELLED" and "interrupted" in j["message"] for j in jobs),
            "still LAUNCHING": sum(j["status"] == "LAUNCHING" for j in jobs),
            "lost (submitted, not recorded)": len(backend - recorded),
            **extra,
        }
        print(f"\nfault-injection report: {json.dumps(report, indent=1)}")
        return report


def _wait_all_ran(ran: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(list(ran.iterdir())) < count and time.monotonic() < deadline:
        time.sleep(0.1)


# -- item 2: a killed launcher ----------------------------------------------------------------


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_killed_launcher_work_is_adopted_or_failed_and_relaunchable(tmp_path: Path, xcore_home: Path, store: str,
                                                                    request: pytest.FixtureRequest) -> None:
    store_url = request.getfixturevalue("pg_url") if store == "postgresql" else None
    scenario = Scenario(tmp_path, xcore_home, "kill", store_url, FI_JOB_HOLD="60", XLOCAL_SLOTS="64")
    launcher = scenario.start()
    scenario.wait_for("ready")  # A recorded, B with the runner and unrecorded, C queued
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()

    listing = scenario.xcore("list")  # any later command resolves the dead launcher's lease, once
    assert listing.returncode == 0, listing.stderr
    again = scenario.xcore("list")
    _wait_all_ran(scenario.ran, 2 * N)  # A and B run (and hold for 60 s); C never started
    b_unit = N + 1
    logs = scenario.xcore("logs", f"{scenario.experiment}/{b_unit}")
    cancelled = scenario.xcore("cancel", str(scenario.experiment))
    started = time.monotonic()
    waited = scenario.xcore("wait", str(scenario.experiment), "--timeout", "60")
    wait_secs = time.monotonic() - started
    report = scenario.report("SIGKILL of `xcore launch` with group B submitted but unrecorded, C queued",
                             **{"exit code of wait": waited.returncode, "seconds wait took": round(wait_secs, 1),
                                "cancel": cancelled.stdout.strip(), "resolution": listing.stderr.strip()})
    assert "adopted" in listing.stderr and "adopted" not in again.stderr  # resolved exactly once
    assert report["still LAUNCHING"] == 0
    assert report["lost (submitted, not recorded)"] == 0
    assert report["jobs submitted to the backend"] == 2 * N
    assert report["jobs recorded with a handle"] == 2 * N  # A as launched, B adopted
    assert report["marked failed to launch"] == N  # C: never reached the backend
    assert f"{N} jobs adopted, {N} marked failed to launch" in listing.stderr
    assert waited.returncode == 1 and wait_secs < 60
    assert logs.returncode == 0 and f"ran {b_unit}" in logs.stdout, logs.stderr  # adopted: not "never launched"
    assert cancelled.returncode == 0 and f"cancelled {2 * N} jobs" in cancelled.stdout, cancelled.stdout

    # An identity relaunch runs exactly the units that never ran.
    relaunch = tmp_path / "relaunch.py"
    relaunch.write_text(textwrap.dedent(f"""
        import os, sys
        import xcore as xm
        import xlocal
        experiment = xm.get_experiment({scenario.experiment})
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", os.environ["FI_JOB"]])])
        with experiment:
            for i in range(1, {3 * N} + 1):
                experiment.add(xm.Job(exe, xlocal.Local(), args={{"unit": i}}), identity=f"u{{i}}")
    """))
    rerun = run_xcore("launch", "--wait", str(relaunch),
                      env={"XCORE_HOME": str(xcore_home), "FI_RAN": str(scenario.ran), "FI_JOB": JOB,
                           **scenario.store_env})
    jobs = scenario.jobs()
    final = scenario.report("identity relaunch after the kill", **{
        "exit code of relaunch --wait": rerun.returncode,
        "C completed": sum(j["status"] == "COMPLETED" for j in jobs if j["work_unit_id"] > 2 * N),
        "A and B cancelled": sum(j["status"] == "CANCELLED" for j in jobs if j["work_unit_id"] <= 2 * N)})
    assert rerun.returncode == 1, rerun.stderr  # the A and B jobs cancelled above count as not succeeded
    assert final["C completed"] == N and final["A and B cancelled"] == 2 * N
    assert sorted(int(p.name) for p in scenario.ran.iterdir()) == list(range(1, 3 * N + 1))  # each ran once
    assert final["jobs recorded with a handle"] == 3 * N and final["lost (submitted, not recorded)"] == 0


SWEEP = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import xcore as xm
    import xlocal

    ctl = Path(os.environ["FI_CTL"])
    first, more = int(os.environ["FI_N"]), int(os.environ["FI_MORE"])
    with xm.create_experiment("sweep kill") as experiment:
        (ctl / "experiment").write_text(str(experiment.experiment_id))
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", os.environ["FI_JOB"]])])
        executor = xlocal.Local()
        add = lambda i: experiment.add(xm.Job(exe, executor, args={"unit": i}), identity=f"u{i}")
        launched = [add(i) for i in range(1, first + 1)]
        launched[-1].result()  # committed and handed to the backend
        seen = [add(i).unit.work_unit_id for i in range(first + 1, first + more + 1)]  # ids the script saw
        full = first + more // int(os.environ["XCORE_RECORD_GROUP"]) * int(os.environ["XCORE_RECORD_GROUP"])
        while len(experiment._store.work_units(experiment.experiment_id)) < full:
            time.sleep(0.01)  # the full groups committed (by the recorder's background thread)
        (ctl / "seen").write_text(" ".join(map(str, seen)))
        (ctl / "ready").write_text("1")
        time.sleep(600)
    """
)
GROUP = 10  # XCORE_RECORD_GROUP in the sweep below


@pytest.mark.parametrize("more", [5, 20, 25], ids=["adds-pending", "right-after-a-group-commit", "both"])
def test_killed_launcher_mid_sweep_submits_only_what_it_recorded(tmp_path: Path, xcore_home: Path, more: int) -> None:
    """SIGKILL while adds wait for their group's commit and/or right after a group was
    committed (its jobs queued, not yet submitted). Counts are exact: the backend has exactly
    the launched jobs, each recorded; every committed group is whole; nothing uncommitted
    reached the backend; an identity relaunch gives every unit the id the script saw."""
    first = 10
    scenario = Scenario(tmp_path, xcore_home, "sweep", FI_JOB_HOLD="0", XCORE_RECORD_GROUP=str(GROUP),
                        XCORE_RECORD_MAX_AGE="600", FI_MORE=str(more))
    scenario.env["FI_N"] = str(first)
    scenario.script.write_text(SWEEP)
    launcher = scenario.start()
    scenario.wait_for("ready")
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    committed = (more // GROUP) * GROUP  # full groups only: the rest were waiting for their commit
    seen = [int(i) for i in (scenario.ctl / "seen").read_text().split()]
    before = scenario.jobs()
    listing = scenario.xcore("list")  # resolves the dead launcher's lease
    report = scenario.report(f"SIGKILL of `xcore launch` with {more} adds after the launched ones "
                             f"(groups of {GROUP}: {committed} committed, {more - committed} waiting)",
                             **{"units recorded before resolution": len({j["work_unit_id"] for j in before}),
                                "resolution": listing.stderr.strip()})
    assert seen == list(range(first + 1, first + more + 1))
    assert report["jobs submitted to the backend"] == first
    assert report["jobs recorded with a handle"] == first
    assert report["lost (submitted, not recorded)"] == 0
    assert report["units recorded"] == first + committed  # whole groups, in add order
    assert sorted({j["work_unit_id"] for j in before}) == list(range(1, first + committed + 1))
    assert report["marked failed to launch"] == committed and report["still LAUNCHING"] == 0

    relaunch = tmp_path / "relaunch.py"
    relaunch.write_text(textwrap.dedent(f"""
        import os, sys
        import xcore as xm
        import xlocal
        experiment = xm.get_experiment({scenario.experiment})
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", os.environ["FI_JOB"]])])
        with experiment:
            for i in range(1, {first + more} + 1):
                unit = experiment.add(xm.Job(exe, xlocal.Local(), args={{"unit": i}}), identity=f"u{{i}}").unit
                assert unit.work_unit_id == i, (i, unit.work_unit_id)
    """))
    rerun = run_xcore("launch", "--wait", str(relaunch),
                      env={"XCORE_HOME": str(xcore_home), "FI_RAN": str(scenario.ran), "FI_JOB": JOB})
    assert rerun.returncode == 0, rerun.stderr
    assert sorted(int(p.name) for p in scenario.ran.iterdir()) == list(range(1, first + more + 1))  # each ran once
    final = scenario.report("identity relaunch after the kill")
    assert final["units recorded"] == first + more and final["lost (submitted, not recorded)"] == 0
    assert final["jobs recorded with a handle"] == final["jobs submitted to the backend"] == first + more


RANDOM_SWEEP = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    import xcore as xm
    import xlocal

    ctl = Path(os.environ["FI_CTL"])
    with xm.create_experiment("random kill") as experiment:
        (ctl / "experiment").write_text(str(experiment.experiment_id))
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), "true")])
        executor = xlocal.Local()
        (ctl / "ready").write_text("1")
        for i in range(1, 1_000_000):
            experiment.add(xm.Job(exe, executor, args={"unit": i}), identity=f"u{i}")
            if i % 8 == 0:
                time.sleep(0.002)  # adds, age commits and launches interleave
    """
)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_launcher_killed_at_a_random_point_of_a_sweep_accounts_for_every_job(tmp_path: Path, xcore_home: Path,
                                                                             seed: int) -> None:
    """SIGKILL at a random instant while adds, group commits (by size and by age) and
    launches run together. Whatever the instant: the units in the store are exactly 1..K
    (committed groups are whole and in order), every job the backend got is recorded with
    its handle (adopted if need be), every other recorded job is marked failed to launch,
    and none is left LAUNCHING."""
    delay = random.Random(seed).uniform(0.3, 1.5)
    scenario = Scenario(tmp_path, xcore_home, "random", XCORE_RECORD_GROUP="16", XCORE_BATCH_MAX_AGE="0.1")
    scenario.script.write_text(RANDOM_SWEEP)
    launcher = scenario.start()
    scenario.wait_for("ready")
    time.sleep(delay)
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    listing = scenario.xcore("list")
    assert listing.returncode == 0, listing.stderr
    jobs = scenario.jobs()
    units = sorted({j["work_unit_id"] for j in jobs})
    report = scenario.report(f"SIGKILL {delay:.2f} s into a sweep (groups of 16, launches every 0.1 s)",
                             **{"resolution": listing.stderr.strip()})
    assert units == list(range(1, len(units) + 1)) and len(jobs) == len(units) > 0
    assert report["lost (submitted, not recorded)"] == 0 and report["still LAUNCHING"] == 0
    assert report["jobs recorded with a handle"] == report["jobs submitted to the backend"]
    assert report["jobs recorded with a handle"] + report["marked failed to launch"] == len(jobs)


# -- item 9: Ctrl-C and SIGTERM ----------------------------------------------------------------


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_interrupt_stops_submission_and_tracks_what_was_submitted(tmp_path: Path, xcore_home: Path, sig: int,
                                                                  code: int) -> None:
    scenario = Scenario(tmp_path, xcore_home, "interrupt")
    launcher = scenario.start()
    scenario.wait_for("ready")
    launcher.send_signal(sig)
    time.sleep(0.3)
    scenario.go()  # let the submission under way (B) finish: it must end up recorded
    rc, err, _ = scenario.finish()
    _wait_all_ran(scenario.ran, 2 * N)
    time.sleep(0.5)  # a C job started after the interrupt would show up by now
    report = scenario.report(f"{signal.Signals(sig).name} while B was being submitted and C queued",
                             **{"exit code of launch": rc, "units that ran": len(list(scenario.ran.iterdir()))})
    assert rc == code, err
    assert report["units that ran"] == 2 * N  # nothing of C ran
    assert report["marked interrupted"] == N
    assert report["jobs recorded with a handle"] == 2 * N and report["lost (submitted, not recorded)"] == 0
    assert report["still LAUNCHING"] == 0
    assert "interrupted" in err or "terminated" in err


# -- item 3: the store fails while the launcher records a submission --------------------------


def _lock_store(scenario: Scenario, hold: float) -> tuple[subprocess.Popen[bytes], Path]:
    ready, release = scenario.ctl / "locked", scenario.ctl / "release"
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(scenario.home / "xcore.db"), str(ready), str(hold),
                               str(release)])
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert time.monotonic() < deadline and locker.poll() is None, "the locker could not lock the store"
        time.sleep(0.02)
    return locker, release


STORE_ENV = {"XCORE_STORE_BUSY_TIMEOUT": "1", "XCORE_STORE_RETRY_SECS": "2"}


def test_store_locked_past_every_retry_fails_loudly_and_nothing_is_lost(tmp_path: Path, xcore_home: Path) -> None:
    scenario = Scenario(tmp_path, xcore_home, "store", **STORE_ENV)
    scenario.start()
    scenario.wait_for("ready")  # B reached the runner; its record comes next
    locker, release = _lock_store(scenario, hold=120)
    scenario.go()
    rc, err, secs = scenario.finish(timeout=60)
    release.touch()
    locker.wait(timeout=30)
    listing = scenario.xcore("list")
    _wait_all_ran(scenario.ran, 2 * N)
    report = scenario.report("the store locked (BEGIN EXCLUSIVE) from another process for longer than busy "
                             "timeout + retries, while B's submission was being recorded",
                             **{"exit code of launch": rc, "seconds to exit after the lock": round(secs, 1),
                                "resolution": listing.stderr.strip()})
    assert rc != 0 and secs < 30
    assert "submitted to xlocal.Local but not recorded" in err and "metadata store failed" in err, err
    assert report["still LAUNCHING"] == 0 and report["lost (submitted, not recorded)"] == 0
    assert report["jobs recorded with a handle"] == 2 * N and f"{N} jobs adopted" in listing.stderr


def test_store_back_before_exit_lets_the_launcher_record_everything_itself(tmp_path: Path,
                                                                           xcore_home: Path) -> None:
    scenario = Scenario(tmp_path, xcore_home, "store-late", **STORE_ENV)
    scenario.start()
    scenario.wait_for("ready")
    locker, release = _lock_store(scenario, hold=120)
    scenario.go()
    scenario.wait_for("b-done")  # B's record failed for good: the launcher stopped submitting
    release.touch()
    locker.wait(timeout=30)
    (scenario.ctl / "released").touch()
    rc, err, _ = scenario.finish(timeout=60)
    report = scenario.report("the store locked past every retry while B was recorded, usable again before "
                             "the launcher exited", **{"exit code of launch": rc})
    assert rc != 0, err
    assert f"recorded {N} submitted jobs" in err, err
    assert report["still LAUNCHING"] == 0 and report["lost (submitted, not recorded)"] == 0  # before any command
    assert report["jobs recorded with a handle"] == 2 * N


def test_store_locked_briefly_is_retried_and_the_launch_succeeds(tmp_path: Path, xcore_home: Path) -> None:
    scenario = Scenario(tmp_path, xcore_home, "store-recovers", XCORE_STORE_BUSY_TIMEOUT="1",
                        XCORE_STORE_RETRY_SECS="30")
    scenario.start()
    scenario.wait_for("ready")
    locker, _ = _lock_store(scenario, hold=3)
    scenario.go()
    rc, err, _ = scenario.finish(timeout=60)
    locker.wait(timeout=30)
    report = scenario.report("the store locked for 3 s (3x the busy timeout) while B's submission was recorded",
                             **{"exit code of launch": rc})
    assert rc == 0, err
    assert report["jobs recorded with a handle"] == 2 * N and report["lost (submitted, not recorded)"] == 0


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 24 MiB tmpfs for XCORE_HOME (root only), filled on demand."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=700", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:  # unbuffered: closing it has nothing left to flush
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError:
            pass
    return filler


def test_full_disk_fails_loudly_and_nothing_is_lost(tmp_path: Path, small_disk: Path) -> None:
    home = small_disk / "home"
    scenario = Scenario(tmp_path, home, "disk", XCORE_STORE_RETRY_SECS="2", FI_JOB_SLEEP="6")
    scenario.start()
    scenario.wait_for("ready")
    runs = home / "plugins" / "xlocal" / "runs"
    deadline = time.monotonic() + 30
    while len(list(runs.glob("*/runner.json"))) < 2:  # both runners up (A's and B's): only the store is hit
        assert time.monotonic() < deadline, "the runners did not start"
        time.sleep(0.05)
    filler = _fill(small_disk)
    scenario.go()
    rc, err, secs = scenario.finish(timeout=60)
    filler.unlink()
    listing = scenario.xcore("list")
    report = scenario.report("XCORE_HOME on a tmpfs filled to the last byte while B's submission was recorded",
                             **{"exit code of launch": rc, "seconds to exit": round(secs, 1),
                                "resolution": listing.stderr.strip()})
    assert rc != 0 and secs < 30, err
    assert "metadata store failed" in err, err
    assert report["still LAUNCHING"] == 0 and report["lost (submitted, not recorded)"] == 0
    assert report["jobs recorded with a handle"] == 2 * N


# -- item 5: concurrent waiters -----------------------------------------------------------------


def test_concurrent_waiters_all_report_failures_and_cancellations(tmp_path: Path, xcore_home: Path) -> None:
    """Several `xcore wait` on one experiment: whoever records a job's end, every waiter's exit
    code and summary come from the final states."""
    ran = tmp_path / "ran"
    ran.mkdir()
    script = tmp_path / "sweep.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        import xcore as xm
        import xlocal
        code = ("import os, sys, time; u = int(sys.argv[1].split('=')[1]); time.sleep(0.5 + 0.05 * u); "
                "sys.exit(3 if u % 4 == 0 else 0)")
        with xm.create_experiment("waiters") as experiment:
            [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", code])])
            for i in range(1, 25):
                experiment.add(xm.Job(exe, xlocal.Local(), args={"unit": i}))
            if os.environ.get("FI_SLEEPER"):
                [sleeper] = experiment.package([xm.binary(xlocal.Local.Spec(), "sleep", args=["30"])])
                experiment.add(xm.Job(sleeper, xlocal.Local(kill_grace_secs=1)))
    """))
    env = {"XCORE_HOME": str(xcore_home), "XLOCAL_SLOTS": "32"}
    launched = run_xcore("launch", str(script), env={**env, "FI_SLEEPER": "1"})
    assert launched.returncode == 0, launched.stderr
    waiters = [subprocess.Popen([sys.executable, "-m", "xcore.cli.main", "wait", "1", *extra],
                                env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for extra in ([], [], [], ["--json"])]
    time.sleep(1.0)
    cancelled = run_xcore("cancel", "1/25", env=env)
    outputs = [w.communicate(timeout=90) for w in waiters]
    codes = [w.returncode for w in waiters]
    launch_wait = run_xcore("launch", "--wait", str(script), env=env, timeout=120)  # a second run, waited for
    summaries = [out.strip().splitlines()[0] if out.strip() else "" for out, _ in outputs[:3]]
    report = {"injected": "4 concurrent `xcore wait 1` while 6 units fail (exit 3) and 1 is cancelled",
              "exit codes of wait": codes, "summaries": summaries, "cancel": cancelled.stdout.strip(),
              "exit code of launch --wait (second run)": launch_wait.returncode}
    print(f"\nfault-injection report: {json.dumps(report, indent=1)}")
    assert cancelled.returncode == 0
    assert codes == [1, 1, 1, 1], outputs
    for summary in summaries:
        assert "6 failed" in summary and "1 cancelled" in summary and "18 completed" in summary, summary
    data = json.loads(outputs[3][0])
    assert data["ok"] is False and len(data["jobs"]) == 25
    assert launch_wait.returncode == 1


