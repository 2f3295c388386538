"""The suite's split across pytest-xdist workers (the repository's conftest.py): each group whole
on one worker, so no two tests of the real schedulers ever run at once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

RECORD = """
import os

def test_{name}_{i}(tmp_path):
    with open(os.environ["SPLIT_LOG"], "a") as log:
        log.write("{group} " + os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")
"""


def test_each_group_runs_whole_on_one_worker(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    shutil.copy(REPO / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = \"-p no:cacheprovider\"\n")
    places = {"schedulers": [tmp_path / "plugins/xhpc/tests/test_a.py", tmp_path / "tests/test_contract_xhpc.py"],
              "rest": [tmp_path / "tests/test_b.py", tmp_path / "plugins/xlocal/tests/test_c.py"]}
    for group, files in places.items():
        for path in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(RECORD.format(name=path.stem, i=i, group=group) for i in range(6)))
    log = tmp_path / "split.log"
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300, env={**_env(), "SPLIT_LOG": str(log)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    ran = [line.split() for line in log.read_text().splitlines()]
    assert len(ran) == 24
    workers = {group: {worker for g, worker in ran if g == group} for group in places}
    assert all(len(found) == 1 for found in workers.values()), workers
    assert workers["schedulers"] != workers["rest"]  # and the two groups side by side


def _env() -> dict[str, str]:
    """This environment without the outer pytest's worker variables."""
    return {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
