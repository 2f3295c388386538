"""A launcher killed before it recorded anything (issue 30): its experiment has no units, and
the next command, finding the launcher gone, marks it failed to launch instead of leaving it
LAUNCHING forever. No timing: the script says when it holds the experiment, then is killed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from core_helpers import run_xcore_fake, write_fake_script
from xcore.launch.registry import open_store

HOLDS_AN_EMPTY_EXPERIMENT = """
import pathlib, time
experiment = xm.create_experiment("killed before its first add")
pathlib.Path(sys.argv[1]).write_text(str(experiment.experiment_id))
time.sleep(600)
"""


def test_an_experiment_whose_launcher_died_before_its_first_add_is_failed_to_launch(xcore_home, tmp_path):
    marker = tmp_path / "created"
    script = write_fake_script(tmp_path / "launch.py", HOLDS_AN_EMPTY_EXPERIMENT)
    launcher = subprocess.Popen([sys.executable, str(script), str(marker)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert launcher.poll() is None, launcher.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    experiment_id = int(marker.read_text())
    assert open_store().get_experiment(experiment_id).launch_status == "LAUNCHING"
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    listed = run_xcore_fake("list")
    assert listed.returncode == 0, listed.stderr
    record = open_store().get_experiment(experiment_id)
    assert record.launch_status == "LAUNCH_FAILED", record
    assert "before finishing the launch" in record.launch_error
    assert record.work_unit_count == 0
