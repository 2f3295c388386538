"""examples/slurm and examples/sge run as written on the test cluster (issue 32: every example
runs in CI): a user's first sweep, `xcore launch --wait` of the example against a cluster named
in clusters.toml, each trial a task of one array job that ends COMPLETED with its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _xcore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False, cwd=REPO, env={**os.environ, "XCORE_QUIET": "1"})


def _launch_and_read(script: str, *args: str) -> list[str]:
    launched = _xcore("launch", "--wait", script, "--", *args)
    assert launched.returncode == 0, launched.stderr[-2000:]
    shown = json.loads(_xcore("show", "1", "--json").stdout)
    units = shown["work_units"]
    assert {u["status"] for u in units} == {"COMPLETED"}
    assert len({job["handle"]["job_id"] for u in units for job in u["jobs"]}) == 1  # one array job
    return [_xcore("logs", f"1/{u['id']}").stdout.strip() for u in units]


@pytest.mark.infra("slurm")
@pytest.mark.parametrize("cluster", [("slurm", "ssh")], indirect=True, ids=["slurm-ssh"])
def test_the_slurm_example_sweeps_on_slurm_over_ssh(cluster):
    logs = _launch_and_read("examples/slurm/launch.py", "--trials", "3", "--cluster", cluster["name"])
    assert [line.split(" loss=")[0] for line in logs] == ["lr=0.10000 seed=0", "lr=0.01000 seed=1",
                                                           "lr=0.00100 seed=2"]


@pytest.mark.infra("sge")
@pytest.mark.parametrize("cluster", [("sge", "local")], indirect=True, ids=["sge-login"])
def test_the_sge_example_sweeps_on_grid_engine(cluster):
    logs = _launch_and_read("examples/sge/launch.py", "--seeds", "3", "--cluster", cluster["name"])
    assert [line.split(" on ")[0] for line in logs] == [f"seed={s} note=it's trial {s}" for s in range(3)]
