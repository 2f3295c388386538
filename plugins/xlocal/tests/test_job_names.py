"""A job's name never becomes a path outside xlocal's log directory (issue 30): ``../../etc``
runs like any name, its log lands in the experiment's log directory, as Docker, Slurm and SGE
sanitise names too."""

from __future__ import annotations

import os
import sys
import time

import pytest

import xlocal
from xcore.model.execution import LaunchContext, LaunchRequest
from xcore.model.status import Status
from xcore.progress import Progress
from xlocal import processes
from xlocal.executables import LocalProcess

pytestmark = pytest.mark.usefixtures("xcore_home")


def test_a_traversing_job_name_runs_and_logs_inside_the_log_directory(tmp_path):
    exe = LocalProcess(name="py", command=[sys.executable, "-c", "print('hi')"])
    names = ["../../etc", "a/b", "a-b", "plain"]
    requests = [LaunchRequest(i + 1, 1, 1, name, exe, xlocal.Local(), [], {}) for i, name in enumerate(names)]
    state = tmp_path / "state"
    handles = processes.launch(requests, LaunchContext(state, Progress(), "names"))
    deadline = time.monotonic() + 30
    states = processes.states(handles)
    while not all(s.status.is_terminal for s in states):
        assert time.monotonic() < deadline, states
        time.sleep(0.05)
        states = processes.states(handles)
    assert [s.status for s in states] == [Status.COMPLETED] * 4, [s.message for s in states]
    logs = state / "logs" / "1"
    paths = [os.path.realpath(h.log_path) for h in handles]
    assert all(os.path.dirname(p) == str(logs.resolve()) for p in paths), paths
    assert len(set(paths)) == 4
    assert [open(p).read() for p in paths] == ["hi\n"] * 4
    assert os.path.basename(paths[3]) == "1-plain.log"
