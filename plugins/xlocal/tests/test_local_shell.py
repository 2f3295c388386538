"""``xcore shell`` into local jobs: a process job's own environment and directory, one command
or a session typed at a terminal; a container job through ``docker exec``."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest
from xlocal_helpers import run_xcore

import xcore as xm
import xlocal
from xcore.testing.terminal import converse

pytestmark = pytest.mark.usefixtures("xcore_home")

PY = sys.executable
HOLD = ("import os, pathlib, sys, time\n"
        "pathlib.Path(sys.argv[1] + '.started').write_text('')\n"
        "deadline = time.time() + 300\n"
        "while not os.path.exists(sys.argv[1]) and time.time() < deadline: time.sleep(0.05)\n")


def _held_job(tmp_path: Path) -> tuple[int, Path]:
    """A process job in ``tmp_path/work`` with SHELL_WORD set, running until ``gate`` exists."""
    gate, work = tmp_path / "gate", tmp_path / "work"
    work.mkdir()
    with xm.create_experiment("shell") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", HOLD, str(gate)])])
        experiment.add(xm.Job(exe, xlocal.Local(cwd=str(work)), env_vars={"SHELL_WORD": "two words; $HOME"}))
    deadline = time.monotonic() + 60
    while not Path(str(gate) + ".started").exists():
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)
    return experiment.experiment_id, gate


def test_a_command_and_a_session_in_a_process_jobs_environment(tmp_path):
    experiment_id, gate = _held_job(tmp_path)
    target = f"{experiment_id}/1"
    code = "import os, sys; print(os.getcwd(), '|', os.environ['SHELL_WORD'], '|', sys.argv[1:])"
    done = run_xcore("shell", target, "--", PY, "-c", code, "a b", "$(id)")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path / 'work'} | two words; $HOME | ['a b', '$(id)']\n"
    output, code = converse([PY, "-m", "xcore.cli.main", "shell", target], "hostname; pwd; exit 3\n",
                            env={**os.environ, "SHELL": "/bin/sh"})
    assert code == 3, output
    assert socket.gethostname() in output and str(tmp_path / "work") in output
    gate.write_text("")
    deadline = time.monotonic() + 60
    while True:
        ended = run_xcore("shell", target, "--", "true")
        if ended.returncode == 1 and "has ended (COMPLETED" in ended.stderr:
            break
        assert time.monotonic() < deadline, ended.stderr
        time.sleep(0.2)
