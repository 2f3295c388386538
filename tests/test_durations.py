"""Durations that mean something (issue 26, item 8): a 34 ms job read ``0.0s`` in ``xcore show``
and on the dashboard; below a second they are written in milliseconds."""

from __future__ import annotations

import time

from xcore.cli.main import main
from xcore.cli.tables import format_duration
from xcore.launch.registry import open_store
from xcore.model.status import JobState, Status
from xcore.store.records import NewJob
from xcore.ui.app import _fmt_duration


def test_durations_below_a_second_are_milliseconds():
    assert format_duration(0.034) == "34ms"
    assert format_duration(0) == "0ms"
    assert format_duration(0.9996) == "1.0s"  # rounds up to a second: written as seconds
    assert format_duration(1.25) == "1.2s" and format_duration(75) == "1m15s"
    assert format_duration(None) == "-"
    assert _fmt_duration(0.034) == "34ms" and _fmt_duration(75) == "1:15" and _fmt_duration(None) == ""


def test_show_writes_a_34_ms_job_in_milliseconds(xcore_home, capsys):
    store = open_store()
    record = store.create_experiment("quick", tags=[], user="me", host="localhost")
    job = NewJob("job", "x.Executor", {}, {}, [], {})
    [job_id] = store.add_work_unit(record.id, 1, "work_unit", {"i": 1}, "", [job])
    start = time.time() - 10
    store.record_states([(job_id, JobState(Status.COMPLETED, "", 0, started_at=start, ended_at=start + 0.034))])
    assert main(["show", str(record.id)]) == 0
    out = capsys.readouterr().out
    assert "34ms" in out and "0.0s" not in out
