"""``xcore watch``: one observer that relaunches retries nobody else is watching, and ends
cleanly on SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import xcore as xm
from core_helpers import _FAKE_CLI
from xcore.cli.main import main
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.testing import fake, plugin_host


def test_a_watch_cycle_relaunches_a_preempted_job(capsys):
    plugin_host({"fake": fake})
    with xm.create_experiment("watched") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    jobs = [j for u in open_store().work_units(experiment.experiment_id) for j in u.jobs]
    fake.preempt(get_host().serializer.load(jobs[0].handle))
    assert main(["watch", "--once"]) == 0
    err = capsys.readouterr().err
    assert "1 active experiment, 2 active jobs on 1 backend kind, 2 changed, 1 retried" in err
    assert "stopped after 1 cycle" in err
    assert [j.attempt for u in open_store().work_units(experiment.experiment_id) for j in u.jobs] == [2, 1]


def test_watch_stops_cleanly_on_sigterm():
    watcher = subprocess.Popen([sys.executable, "-c", _FAKE_CLI, "watch", "--interval", "0.2"],
                               stderr=subprocess.PIPE, text=True)
    assert watcher.stderr is not None
    first = watcher.stderr.readline()  # the first cycle's line: it is watching
    assert "xcore watch:" in first and "active experiment" in first, first
    watcher.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    while watcher.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watcher.returncode == 0
    assert "stopped after" in watcher.stderr.read()


def test_a_bad_interval_is_refused(capsys):
    assert main(["watch", "--interval", "0"]) == 1
    assert "--interval must be" in capsys.readouterr().err
