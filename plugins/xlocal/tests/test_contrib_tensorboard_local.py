"""``xcore.contrib.tensorboard`` on xlocal: the auxiliary unit really serves TensorBoard (installed
for the tests by scripts/test.sh), does not count toward the experiment's status, and stops."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import xcore as xm
import xlocal
from xcore.contrib import tensorboard
from xcore.model.status import Status
from xcore.testing import require_service

pytestmark = pytest.mark.usefixtures("xcore_home")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str, deadline: float) -> dict:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return dict(json.loads(response.read()))
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def test_tensorboard_serves_the_logdir_as_an_auxiliary_unit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # The job's python3 is the one on PATH, as where a user runs xcore in an activated venv. (Not
    # python=sys.executable: xlocal resolves a Binary's path, and the venv's python resolves to the
    # interpreter outside the venv, which has no TensorBoard.)
    require_service("tensorboard", lambda: importlib.util.find_spec("tensorboard") is not None,
                    "pip install tensorboard (scripts/test.sh installs it)")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    logdir = tmp_path / "logs"
    logdir.mkdir()
    port = _free_port()
    with xm.create_experiment("tensorboard") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", "pass"])])
        experiment.add(xm.Job(exe, xlocal.Local()))
        tensorboard.add_tensorboard(experiment, str(logdir), xlocal.Local(), timeout_secs=300,
                                    args={"port": port, "host": "127.0.0.1"})
    [unit] = [u for u in experiment._units.values() if isinstance(u.role, xm.AuxiliaryUnitRole)]
    try:
        served = _get(f"http://127.0.0.1:{port}/data/logdir", time.monotonic() + 120)
        assert served == {"logdir": str(logdir)}
        experiment.work_units[1].wait_until_complete().result()
        assert experiment.get_status().status is Status.COMPLETED  # TensorBoard still serves
        assert unit.get_status().status is Status.RUNNING
    finally:
        unit.stop()
    # TensorBoard exits 0 on SIGTERM, and xlocal reads a clean exit as COMPLETED even after a
    # stop; killed before its handler is installed, it reads CANCELLED. Either way it has ended.
    deadline = time.monotonic() + 60
    while (status := unit.get_status().status).is_active and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status in (Status.COMPLETED, Status.CANCELLED)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/data/logdir", timeout=5)
