"""`xcore ui` listens before it reads the results nobody has read yet (issue 30): with
thousands of unread Slurm results that reading took 5-25 s, one SSH command per job, and the
dashboard answered nothing meanwhile."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import fake, plugin_host

pytest.importorskip("uvicorn", reason="the dashboard extra is not installed (xcore-core[ui])")


def test_the_dashboard_answers_while_the_results_are_still_being_read(tmp_path: Path):
    plugin_host({"fake": fake})
    with xm.create_experiment("unread") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor()))
    entered = tmp_path / "reading-results"
    code = textwrap.dedent(f"""
        import pathlib, time
        from xcore.runtime import results

        def slow(store, host, experiment_id):  # as a command per job to a far cluster would be
            pathlib.Path({str(entered)!r}).touch()
            time.sleep(120)

        results.collect = slow
        from xcore.cli.main import main
        main(["ui", "--port", "0"])
    """)
    ui = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "XCORE_QUIET": "1"})
    try:
        assert ui.stdout is not None
        ready, _, _ = select.select([ui.stdout], [], [], 30)  # it used to read everything first
        line = ui.stdout.readline() if ready else ""
        assert "http://" in line, (line, ui.stderr.read() if ui.poll() is not None and ui.stderr else "")
        base, _, token = line.split()[-1].partition("?token=")
        deadline = time.monotonic() + 30
        while not entered.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert entered.exists(), "the results were never read"
        request = urllib.request.Request(base, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:  # answered while reading is under way
            assert response.status == 200
        assert ui.poll() is None
    finally:
        ui.terminate()
        ui.wait(10)
