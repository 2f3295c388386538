"""Real processes through xlocal: launching, status from later processes, cancel, limits."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
from xlocal_helpers import run_xcore, write_script

import xcore as xm
import xlocal
from xcore.errors import ExperimentUnitFailedError, PackagingError, UnknownKindError
from xcore.model.status import Status

pytestmark = pytest.mark.usefixtures("xcore_home")  # the isolation the core's tests get from conftest

PY = sys.executable


def python_job(code: str):
    return xm.binary(xlocal.Local.Spec(), PY, args=["-c", code])


def test_sync_sweep_ids_statuses_exit_codes_and_logs():
    with xm.create_experiment("sweep") as experiment:
        code = "import sys; print('args', sys.argv[1:]); sys.exit(int(sys.argv[1][7:]) % 2)"
        [exe] = experiment.package([python_job(code)])
        futures = [experiment.add(xm.Job(exe, xlocal.Local(), args={"seed": i})) for i in range(4)]
        assert [f.unit.work_unit_id for f in futures] == [1, 2, 3, 4]
        experiment.wait_until_complete()
        statuses = {i: u.get_status() for i, u in experiment.work_units.items()}
    assert [statuses[i].is_completed for i in (1, 2, 3, 4)] == [True, False, True, False]
    assert statuses[2].is_failed and "exit code 1" in statuses[2].message
    [unit] = xm.get_experiment(experiment.experiment_id)._store.work_units(experiment.experiment_id, [4])
    assert unit.jobs[0].exit_code == 1 and unit.jobs[0].args == ["-c", unit.jobs[0].args[1], "--seed=3"]
    assert Path(unit.jobs[0].log_path).read_text() == "args ['--seed=3']\n"


def test_async_add_and_wait_raise_for_failures():
    async def main():
        async with xm.create_experiment("async") as experiment:
            [ok, bad] = experiment.package([python_job("pass"), python_job("raise SystemExit(3)")])
            unit = await experiment.add(xm.Job(ok, xlocal.Local()))
            assert isinstance(unit, xm.WorkUnit)
            await unit.wait_until_complete()
            failing = await experiment.add(xm.Job(bad, xlocal.Local()))
            with pytest.raises(ExperimentUnitFailedError, match="exit code 3"):
                await failing.wait_until_complete()

    asyncio.run(main())


def test_job_group_and_generator_and_auxiliary_unit():
    with xm.create_experiment("groups") as experiment:
        [exe] = experiment.package([python_job("import sys; print(sys.argv[1:])")])
        group = xm.JobGroup(train=xm.Job(exe, xlocal.Local(), args={"role": "train"}),
                            eval=xm.Job(exe, xlocal.Local(), args={"role": "eval"}))
        experiment.add(group, args={"eval": {"args": {"extra": 1}, "env_vars": {"E": "1"}}})

        async def generator(work_unit, steps):
            work_unit.add(xm.Job(exe, xlocal.Local(), args={"steps": steps}))
            work_unit.add(xm.Job(exe, xlocal.Local(), args={"steps": steps + 1}))

        experiment.add(generator, args={"steps": 5})
        experiment.add(xm.AuxiliaryUnitJob(xm.Job(exe, xlocal.Local()), termination_delay_secs=0))
        assert experiment.work_unit_count == 2
        experiment.wait_until_complete()
    store = experiment._store
    units = store.work_units(experiment.experiment_id)
    assert [u.role for u in units] == ["work_unit", "work_unit", "auxiliary"]
    assert [j.name for j in units[0].jobs] == ["train", "eval"]
    assert units[0].jobs[1].args[-2:] == ["--role=eval", "--extra=1"] and units[0].jobs[1].env == {"E": "1"}
    assert [j.args[-1] for j in units[1].jobs] == ["--steps=5", "--steps=6"]
    assert all(j.status is Status.COMPLETED for u in units[:2] for j in u.jobs)
    assert store.get_experiment(experiment.experiment_id).status_counts == {"COMPLETED": 2}


def test_identity_adds_once():
    with xm.create_experiment("identity") as experiment:
        [exe] = experiment.package([python_job("pass")])
        first = experiment.add(xm.Job(exe, xlocal.Local()), identity="a")
        second = experiment.add(xm.Job(exe, xlocal.Local()), identity="a")
        assert first.unit is second.unit and experiment.work_unit_count == 1


def test_status_survives_launcher_exit(tmp_path):
    """A later process sees jobs that finished after the launcher exited, with exit codes."""
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("detached") as e:
    exit_later = "import sys,time; time.sleep(1.5); sys.exit(int(sys.argv[1][-1]))"
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", exit_later])])
    for code in (0, 4):
        e.add(xm.Job(exe, xlocal.Local(), args={{"code": code}}))
""")
    started = time.monotonic()
    result = run_xcore("launch", str(script))
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 1.5 + 1.0, "the launcher must not wait for detached jobs"
    show = json.loads(run_xcore("show", "1", "--json").stdout)
    assert {u["status"] for u in show["work_units"]} <= {"PENDING", "RUNNING"}
    assert run_xcore("wait", "1", "--timeout", "30").returncode == 1
    show = json.loads(run_xcore("show", "1", "--json").stdout)
    assert [(u["status"], u["exit_codes"]) for u in show["work_units"]] == [("COMPLETED", [0]), ("FAILED", [4])]
    assert all(u["duration"] >= 1.4 for u in show["work_units"])


def test_cancel_stops_the_whole_process_tree_term_then_kill(tmp_path, monkeypatch):
    """TERM first; what ignores it is killed after the executor's grace (1 s here).
    With one slot, the second unit is still queued and is cancelled before it starts."""
    monkeypatch.setenv("XLOCAL_SLOTS", "1")
    marker = tmp_path / "child.pid"
    # The job starts a child in its own session that ignores TERM: only KILL after the grace stops it.
    code = (
        "import os, signal, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import signal,time;"
        " signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'], start_new_session=True)\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    with xm.create_experiment("cancel") as experiment:
        [exe] = experiment.package([python_job(code)])
        unit = experiment.add(xm.Job(exe, xlocal.Local(kill_grace_secs=1))).result()
        queued = experiment.add(xm.Job(exe, xlocal.Local(kill_grace_secs=1))).result()
        # "waiting for a slot (1 of 1 busy)" (slots counted from the kernel's lock table), or
        # "waiting for a free slot" where they cannot be counted
        message = queued.get_status().message
        assert re.fullmatch(rf"{re.escape(xm.Binary(PY).name)}: waiting for a (free slot|slot \(\d of 1 busy\))",
                            message), message
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(marker.read_text())
    started = time.monotonic()
    result = run_xcore("cancel", f"{experiment.experiment_id}")
    assert result.returncode == 0, result.stderr
    assert 1.0 <= time.monotonic() - started < 5, "grace of 1 s, then KILL"
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    show = json.loads(run_xcore("show", str(experiment.experiment_id), "--json").stdout)
    assert [u["status"] for u in show["work_units"]] == ["CANCELLED", "CANCELLED"]
    assert unit.get_status().is_cancelled and queued.get_status().is_cancelled


def test_machine_wide_slot_limit_bounds_concurrency(tmp_path, monkeypatch):
    monkeypatch.setenv("XLOCAL_SLOTS", "2")
    log = tmp_path / "spans"
    log.mkdir()
    code = (f"import sys,time,os; s=time.time(); time.sleep(0.3);"
            f" open(os.path.join({str(log)!r}, sys.argv[1]), 'w').write(f'{{s}} {{time.time()}}')")
    with xm.create_experiment("slots") as experiment:
        [exe] = experiment.package([python_job(code)])
        for i in range(6):
            experiment.add(xm.Job(exe, xlocal.Local(), args=[str(i)]))
    experiment.wait_until_complete()
    spans = [tuple(map(float, p.read_text().split())) for p in log.iterdir()]
    assert len(spans) == 6
    peak = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert peak == 2


def test_missing_binary_is_a_clear_error_and_nothing_is_recorded(tmp_path):
    with pytest.raises(PackagingError, match="does not exist"):
        with xm.create_experiment("missing") as experiment:
            experiment.package([xm.binary(xlocal.Local.Spec(), str(tmp_path / "nope.sh"))])
    with pytest.raises(PackagingError, match="not found on PATH"):
        xm.create_experiment("missing2").package([xm.binary(xlocal.Local.Spec(), "no-such-command-xyz")])


def test_binary_that_vanishes_before_start_fails_with_reason(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    with xm.create_experiment("vanish") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), str(script))])
        script.unlink()
        unit = experiment.add(xm.Job(exe, xlocal.Local())).result()
    experiment.wait_until_complete()
    status = unit.get_status()
    assert status.is_failed and "cannot start" in status.message


def test_unknown_executor_is_rejected_before_anything_is_recorded():
    import attrs

    @attrs.define(kw_only=True)
    class Elsewhere(xm.Executor):
        pass

    with xm.create_experiment("unknown") as experiment:
        [exe] = experiment.package([python_job("pass")])
        with pytest.raises(UnknownKindError, match="not registered by any installed plugin"):
            experiment.add(xm.Job(exe, Elsewhere()))
    assert experiment._store.work_units(experiment.experiment_id) == []


def test_env_reaches_program_and_secrets_are_redacted_in_store(tmp_path):
    out = tmp_path / "env.json"
    code = f"import json, os; json.dump({{k: os.environ[k] for k in ('API_TOKEN', 'PLAIN')}}, open({str(out)!r}, 'w'))"
    with xm.create_experiment("env") as experiment:
        [exe] = experiment.package([python_job(code)])
        experiment.add(xm.Job(exe, xlocal.Local(), env_vars={"API_TOKEN": "s3cr3t-value", "PLAIN": "a b $c"}))
    experiment.wait_until_complete()
    assert json.loads(out.read_text()) == {"API_TOKEN": "s3cr3t-value", "PLAIN": "a b $c"}
    [unit] = experiment._store.work_units(experiment.experiment_id)
    assert unit.jobs[0].env == {"API_TOKEN": "<redacted>", "PLAIN": "a b $c"}
    db = (Path(os.environ["XCORE_HOME"]) / "xcore.db").read_bytes() + b"".join(
        p.read_bytes() for p in Path(os.environ["XCORE_HOME"]).glob("xcore.db*"))
    assert b"s3cr3t-value" not in db
    assert "s3cr3t" not in run_xcore("show", "1", "--json").stdout


def test_logs_follow_streams_until_the_job_ends():
    with xm.create_experiment("follow") as experiment:
        code = "import time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.3)"
        [exe] = experiment.package([python_job(code)])
        experiment.add(xm.Job(exe, xlocal.Local()))
    result = run_xcore("logs", f"{experiment.experiment_id}/1", "--follow", timeout=30)
    assert result.returncode == 0 and result.stdout == "line 0\nline 1\nline 2\n"
