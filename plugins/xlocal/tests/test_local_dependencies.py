"""``depends_on`` on xlocal: the runner starts a job only once its dependencies ended, with
the launcher gone and no xcore process watching (``xlocal.runner._after``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from xlocal_helpers import run_xcore, write_script

import xcore as xm
import xlocal
from xcore.model.status import Status

pytestmark = pytest.mark.usefixtures("xcore_home")

PY = sys.executable
# Each job appends "<name> start|end <time>" to the file, sleeping its seconds between.
STEP = ("import sys, time; name, secs, code, out = sys.argv[1:5]\n"
        "def note(what):\n"
        "    with open(out, 'a') as f: f.write(f'{name} {what} {time.time()!r}\\n')\n"
        "note('start'); time.sleep(float(secs)); note('end'); sys.exit(int(code))")


def _times(path: Path) -> dict[tuple[str, str], float]:
    found = {}
    for line in path.read_text().splitlines():
        name, what, at = line.split()
        found[(name, what)] = float(at)
    return found


def _wait_for_line(path: Path, text: str, secs: float = 60) -> None:
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}: {path.read_text() if path.exists() else 'no file'}")


def test_a_diamond_runs_in_order_with_the_launcher_gone(tmp_path):
    out = tmp_path / "times.txt"
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("diamond") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", {STEP!r}])])
    def step(name, secs, depends_on=()):
        return e.add(xm.Job(exe, xlocal.Local(), args=[name, secs, 0, {str(out)!r}]), depends_on=list(depends_on))
    a = step("A", 1.0)
    b = step("B", 0.3, [a])
    c = step("C", 0.6, [a])
    step("D", 0.1, [b, c])
""")
    started = time.monotonic()
    result = run_xcore("launch", str(script))
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 10 and "D end" not in (out.read_text() if out.exists() else "")
    _wait_for_line(out, "D end")  # nothing of xcore runs meanwhile: the runner alone orders them
    t = _times(out)
    assert t[("A", "end")] <= t[("B", "start")] and t[("A", "end")] <= t[("C", "start")]
    assert max(t[("B", "end")], t[("C", "end")]) <= t[("D", "start")]
    assert run_xcore("wait", "1", "--timeout", "60").returncode == 0
    show = json.loads(run_xcore("show", "1", "--json").stdout)
    assert [u["status"] for u in show["work_units"]] == ["COMPLETED"] * 4
    assert [u.get("depends_on") for u in show["work_units"]] == [None, ["1/1"], ["1/1"], ["1/2", "1/3"]]
    assert show["work_units"][3]["depends_when"] == "success"


def test_a_failed_dependency_cancels_what_waits_on_it_transitively(tmp_path):
    out = tmp_path / "times.txt"
    with xm.create_experiment("chain") as e:
        [exe] = e.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", STEP])])
        a = e.add(xm.Job(exe, xlocal.Local(), args=["A", 0.2, 3, str(out)]))
        b = e.add(xm.Job(exe, xlocal.Local(), args=["B", 0, 0, str(out)]), depends_on=[a])
        after_any = e.add(xm.Job(exe, xlocal.Local(), args=["F", 0, 0, str(out)]), depends_on=[a], when="finished")
        e.add(xm.Job(exe, xlocal.Local(), args=["C", 0, 0, str(out)]), depends_on=[b, after_any])
        jobs = e.wait_until_complete()
    by_unit = {j.work_unit_id: (j.status, j.message) for j in jobs}
    assert by_unit[1][0] is Status.FAILED
    assert by_unit[2] == (Status.CANCELLED, f"dependency {e.experiment_id}/1 failed")
    assert by_unit[3][0] is Status.COMPLETED  # when="finished": it runs after a failure too
    assert by_unit[4] == (Status.CANCELLED, f"dependency {e.experiment_id}/2 cancelled")
    ran = {name for name, _ in _times(out)}
    assert ran == {"A", "F"}  # B and C never started


def test_a_chain_across_backends_is_released_by_xcore_wait(tmp_path):
    """xlocal -> the fake backend: the fake cannot wait natively, so its unit is held until
    `xcore wait` (a later process; the launcher is gone) sees the xlocal job complete."""
    out = tmp_path / "times.txt"
    script = write_script(tmp_path / "launch.py", f"""
from xcore.testing import fake
with xm.create_experiment("across") as e:
    [local] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", {STEP!r}])])
    [faked] = e.package([xm.binary(fake.FakeSpec(), {PY!r}, args=["-c", {STEP!r}])])
    a = e.add(xm.Job(local, xlocal.Local(), args=["A", 0.5, 0, {str(out)!r}]))
    e.add(xm.Job(faked, fake.FakeExecutor(), args=["B", 0, 0, {str(out)!r}]), depends_on=[a])
""")
    fake_cli = ("import sys\nfrom xcore.testing import fake, plugin_host\n"
                "plugin_host({'fake': fake}, entry_points=True)\n"
                "from xcore.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-c", fake_cli, *args], capture_output=True, text=True, timeout=120)

    assert (launched := cli("launch", str(script))).returncode == 0, launched.stderr
    show = json.loads(cli("show", "1", "--json").stdout)
    held = show["work_units"][1]
    assert (held["status"], held["jobs"][0]["message"], held["depends_on"]) == ("PENDING", "waiting for 1/1", ["1/1"])
    waited = cli("wait", "1", "--timeout", "60")
    assert waited.returncode == 0, waited.stderr
    t = _times(out)
    assert t[("A", "end")] <= t[("B", "start")]
    show = json.loads(cli("show", "1", "--json").stdout)
    assert [u["status"] for u in show["work_units"]] == ["COMPLETED", "COMPLETED"]


def test_a_dependency_whose_runner_was_killed_reads_failed_and_its_dependent_never_runs(tmp_path, monkeypatch):
    """Each batch its own runner: the dependency's runner and job are killed; the dependent's
    runner sees that runner gone (its lock let go) and cancels the dependent instead of waiting
    for good."""
    import os
    import signal

    monkeypatch.setenv("XLOCAL_RUNNER_PER_BATCH", "1")
    out = tmp_path / "times.txt"
    with xm.create_experiment("killed") as e:
        [exe] = e.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", STEP])])
        a = e.add(xm.Job(exe, xlocal.Local(), args=["A", 60, 0, str(out)]))
        a.result()  # its own batch, its own runner
        b = e.add(xm.Job(exe, xlocal.Local(), args=["B", 0, 0, str(out)]), depends_on=[a])
        b.result()
    _wait_for_line(out, "A start")
    [job_a] = e._store.work_units(e.experiment_id, [1])[0].jobs
    run_dir = Path(job_a.handle["run_dir"])
    runner = json.loads((run_dir / "runner.json").read_text())
    [started] = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()
                 if '"start"' in line]
    os.kill(runner["pid"], signal.SIGKILL)  # the runner and its job die together (a crash, an OOM kill)
    os.kill(started["pid"], signal.SIGKILL)
    jobs = {j.work_unit_id: j for j in e.wait_until_complete(timeout=60)}
    assert jobs[1].status is Status.FAILED
    assert (jobs[2].status, jobs[2].message) == (Status.CANCELLED, f"dependency {e.experiment_id}/1 failed")
    assert ("B", "start") not in _times(out)
