"""examples/sweep/launch_resumable.py runs as written (issue 23: "the example sweep gains a
resumable variant"): every trial's first attempt stops itself at a step, saves a checkpoint in
``XCORE_CHECKPOINT_DIR`` and exits 75; xlocal's runner starts it again as attempt 2, which goes
on from that step to the very result of a run never stopped."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from xlocal_helpers import REPO, run_xcore

pytestmark = pytest.mark.usefixtures("xcore_home")

TRAIN = REPO / "examples" / "sweep" / "train.py"


def _train(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TRAIN), *args], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, **(env or {})})


@pytest.mark.timeout(300)
def test_each_trial_stops_at_the_step_and_resumes_from_its_checkpoint_in_attempt_2(xcore_home, tmp_path):
    results = tmp_path / "results"
    launched = run_xcore("launch", "--wait", "examples/sweep/launch_resumable.py", "--", "--steps=300",
                         "--preempt_at=150", f"--results={results}", cwd=REPO, timeout=240)
    assert launched.returncode == 0, launched.stderr[-3000:]
    shown = json.loads(run_xcore("show", "1", "--json").stdout)
    units = shown["work_units"]
    assert len(units) == 4 and {u["status"] for u in units} == {"COMPLETED"}
    for unit in units:
        [job] = unit["jobs"]
        assert job["attempt"] == 2
        assert [(a["number"], a["status"], a["exit_code"]) for a in job["attempts"]] == [
            (1, "FAILED", 75), (2, "COMPLETED", 0)]
        log = run_xcore("logs", f"1/{unit['id']}").stdout
        assert "SIGUSR1 at step 150: checkpoint saved, exiting 75" in log, log
        assert "resumed from step 150 (attempt 2)" in log, log  # XCORE_ATTEMPT was 2
        # attempt 2 did not start over: step 100 was passed once, by attempt 1
        assert log.count("step 100: loss") == 1 and log.count("step 200: loss") == 1, log
        checkpoint = xcore_home / "plugins" / "xlocal" / "checkpoints" / "1" / str(unit["id"])
        assert [p.name for p in checkpoint.iterdir()] == ["train.json"]  # no temporary file left
        assert stat.S_IMODE((checkpoint / "train.json").stat().st_mode) == 0o600
        assert json.loads((checkpoint / "train.json").read_text())["step"] == 300

    # The resumed trial (its random state included) ends exactly where a run never stopped does.
    args = units[0]["args"]
    plain = _train(f"--lr={args['lr']}", f"--batch_size={args['batch_size']}", "--steps=300",
                   f"--output_dir={tmp_path / 'plain'}")
    assert plain.returncode == 0, plain.stderr
    resumed = json.loads(Path(args["output_dir"], "metrics.json").read_text())
    expected = json.loads((tmp_path / "plain" / "metrics.json").read_text())
    assert [resumed[k] for k in ("loss", "w", "b")] == [expected[k] for k in ("loss", "w", "b")]


def test_sigterm_saves_a_checkpoint_and_exits_75_and_the_next_run_goes_on_from_it(tmp_path):
    env = {**os.environ, "XCORE_CHECKPOINT_DIR": str(tmp_path)}
    run = subprocess.Popen([sys.executable, str(TRAIN), "--lr=0.1", "--batch_size=8", "--steps=100000000"],
                           stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert run.stdout is not None
        deadline = time.monotonic() + 60
        while not run.stdout.readline().startswith("step 100:"):  # it is past the first steps
            assert time.monotonic() < deadline and run.poll() is None
        run.send_signal(signal.SIGTERM)
        rest, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 75, rest
    stopped_at = json.loads((tmp_path / "train.json").read_text())["step"]
    assert stopped_at >= 100 and f"SIGTERM at step {stopped_at}: checkpoint saved" in rest
    resumed = _train("--lr=0.1", "--batch_size=8", f"--steps={stopped_at + 1}",
                     env={"XCORE_CHECKPOINT_DIR": str(tmp_path), "XCORE_ATTEMPT": "2"})
    assert resumed.returncode == 0 and resumed.stdout.startswith(f"resumed from step {stopped_at} (attempt 2)\n")


def test_without_a_checkpoint_directory_nothing_is_saved_and_signals_are_not_caught(tmp_path):
    run = _train("--lr=0.1", "--batch_size=8", "--steps=200", "--preempt_at=100",
                 env={"XCORE_CHECKPOINT_DIR": ""})
    assert run.returncode == 0 and "SIGUSR1" not in run.stdout and "final loss" in run.stdout
