"""A disk that fills up mid-sweep: the runner says so for the jobs it could not start and
records the ends of those it started; `xcore list` and `show` still read the store (a read
needs no space); once space is back the next launch works. XCORE_HOME is a small tmpfs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import xcore as xm
import xlocal
from xcore.testing import require_service

JOBS = 60
# Job 0 waits for the test's go (the launch is recorded by then), then fills the disk; the
# others do nothing. Their start and end lines then no longer fit in events.jsonl's page.
FILL = ("import os, sys, time\n"
        "home, go, index = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
        "if index == 0:\n"
        "    deadline = time.time() + 60\n"
        "    while not os.path.exists(go) and time.time() < deadline:\n"
        "        time.sleep(0.05)\n"
        "    with open(os.path.join(home, 'fill'), 'wb', buffering=0) as out:\n"
        "        try:\n"
        "            while True:\n"
        "                out.write(bytes(65536))\n"
        "        except OSError:\n"
        "            pass\n"
        "        try:\n"
        "            while True:\n"
        "                out.write(bytes(512))\n"
        "        except OSError:\n"
        "            pass\n")


@pytest.fixture
def small_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """XCORE_HOME on its own 16 MiB tmpfs (root only: mount)."""
    require_service("root", os.geteuid() == 0, "mounts a small tmpfs as XCORE_HOME: run as root")
    home = tmp_path / "small-home"
    home.mkdir(mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=700", "tmpfs", str(home)], check=True)
    monkeypatch.setenv("XCORE_HOME", str(home))
    monkeypatch.setenv("XCORE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("XCORE_STORE", raising=False)
    from xcore.hooks.host import reset_host

    reset_host()
    try:
        yield home
    finally:
        reset_host()
        subprocess.run(["umount", "-l", str(home)], check=False)  # lazy: an idle runner may still hold a file


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def test_disk_full_mid_sweep_is_reported_and_reads_still_work(small_home: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    with xm.create_experiment("disk full") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", FILL])])
        for i in range(JOBS):
            experiment.add(xm.Job(exe, xlocal.Local(max_parallel=1), args=[str(small_home), str(go), str(i)]))
    go.touch()  # the launch is recorded: now the disk fills
    jobs = experiment.wait_until_complete(timeout=120)
    assert os.statvfs(small_home).f_bavail == 0, "the disk is not full: the test proves nothing"
    messages = [(j.status.name, j.message) for j in jobs]
    no_space = [m for s, m in messages if s == "FAILED" and "no space left on device" in m]
    completed = [m for s, m in messages if s == "COMPLETED"]
    assert messages[0][0] == "COMPLETED"
    assert no_space, messages
    assert len(no_space) + len(completed) == JOBS, messages

    # Reads on the full disk: exit 0, and the states the backend gives.
    listed = _cli("list")
    assert listed.returncode == 0, listed.stderr
    shown = _cli("show", str(experiment.experiment_id))
    assert shown.returncode == 0 and "no space left on device" in shown.stdout, shown.stderr
    as_json = _cli("show", str(experiment.experiment_id), "--json")
    assert as_json.returncode == 0, as_json.stderr
    states = [job["status"] for unit in json.loads(as_json.stdout)["work_units"] for job in unit["jobs"]]
    assert sorted(states) == sorted(s for s, _ in messages)

    # Space back: the next launch works and what was recorded is still there.
    (small_home / "fill").unlink()
    with xm.create_experiment("after") as after:
        [exe] = after.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", "pass"])])
        after.add(xm.Job(exe, xlocal.Local()))
    assert [j.status for j in after.wait_until_complete(timeout=60)] == [xm.Status.COMPLETED]
    again = _cli("show", str(experiment.experiment_id), "--json")
    assert again.returncode == 0 and len(json.loads(again.stdout)["work_units"]) == JOBS
