"""examples/containers runs as written on the real Docker engine (issue 32: every example runs
in CI): `xcore launch --wait` builds the project's image, runs each trial in its own container,
and each writes its result into the mounted results directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xcore.testing import require_module, require_service

REPO = Path(__file__).resolve().parents[3]
BASE_IMAGE = os.environ.get("XLOCAL_TEST_BASE_IMAGE", "xcore-python:3.11")


def _engine_up() -> bool:
    import docker

    try:
        client = docker.from_env()
        client.ping()
        client.api.inspect_image(BASE_IMAGE)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False


def _xcore(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                          timeout=420, check=False, cwd=REPO, env=env)


@pytest.mark.infra("docker")
@pytest.mark.timeout(600)
def test_the_containers_example_runs_every_trial_in_its_container(tmp_path):
    require_module("docker", "pip install 'xcore-xlocal[docker]' (scripts/test.sh does)")
    import docker

    require_service("dockerd", _engine_up,
                    f"run `sudo bash scripts/infra/docker.sh` (starts dockerd, builds {BASE_IMAGE})")
    env = {**os.environ, "XCORE_HOME": str(tmp_path / "home"), "XCORE_QUIET": "1"}
    env.pop("XCORE_STORE", None)
    results = tmp_path / "results"
    try:
        launched = _xcore(env, "launch", "--wait", "examples/containers/launch.py", "--",
                          f"--base-image={BASE_IMAGE}", f"--results={results}")
        assert launched.returncode == 0, launched.stderr[-3000:]
        units = json.loads(_xcore(env, "show", "1", "--json").stdout)["work_units"]
        assert len(units) == 8 and {u["status"] for u in units} == {"COMPLETED"}
        assert len(list(results.rglob("*.json"))) == 8
    finally:
        client = docker.from_env()
        shown = _xcore(env, "show", "1", "--json")
        units = json.loads(shown.stdout)["work_units"] if shown.returncode == 0 else []
        mine = {job["handle"].get("container_id") for u in units for job in u["jobs"] if job.get("handle")}
        for container in client.api.containers(all=True, filters={"label": "xcore.managed-by=xlocal"}):
            if container["Id"] in mine:
                client.api.remove_container(container["Id"], force=True)
