"""`xcore show` says when an experiment's notifications failed or are being retried (issue 28):
one line where users look, a count in `--json`, from one indexed read of the outbox."""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing

import xcore as xm
from xcore.cli.main import main
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.model.status import Status
from xcore.paths import config_dir, store_url
from xcore.store.outbox import TROUBLE, NewNotification
from xcore.testing import fake, plugin_host


def _experiment() -> tuple[int, object]:
    plugin_host({"fake": fake})
    with xm.create_experiment("noisy") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    [job] = experiment._all_jobs()
    return experiment.experiment_id, get_host().serializer.load(job.handle)


def _show(capsys, *args: str) -> str:
    assert main(["show", *args]) == 0
    return capsys.readouterr().out


def test_no_line_and_zero_counts_without_trouble(capsys):
    experiment_id, _ = _experiment()
    store = open_store()
    store.add_notifications([NewNotification("e/sent", "hook", experiment_id, "unit_failed", "{}")])
    [row] = store.take_notifications("me", 60.0)
    store.finish_notification(row.event_id, row.sink, "me", "sent")
    assert not any(line.startswith("  notify ") for line in _show(capsys, str(experiment_id)).splitlines())
    assert json.loads(_show(capsys, str(experiment_id), "--json"))["notifications"] == {"failed": 0, "retrying": 0}


def test_failed_and_retried_deliveries_are_one_line_and_a_json_count(capsys):
    experiment_id, _ = _experiment()
    store = open_store()
    store.add_notifications([NewNotification(f"e/{n}", "hook", experiment_id, "unit_failed", "{}") for n in range(3)])
    assert len(store.take_notifications("me", 60.0)) == 3
    store.finish_notification("e/0", "hook", "me", "failed", "HTTP 500 from hooks.lab.example")
    store.finish_notification("e/1", "hook", "me", "failed", "HTTP 500 from hooks.lab.example")
    store.finish_notification("e/2", "hook", "me", "pending", "HTTP 503 from hooks.lab.example", time.time() + 600)
    lines = _show(capsys, str(experiment_id)).splitlines()
    assert f"  notify   2 failed deliveries, 1 being retried (xcore notifications {experiment_id})" in lines
    assert lines.index("") > max(i for i, line in enumerate(lines) if line.startswith("  notify"))  # in the head
    data = json.loads(_show(capsys, str(experiment_id), "--json"))
    assert data["notifications"] == {"failed": 2, "retrying": 1}


def test_a_sink_that_fails_during_show_is_reported_by_that_show(capsys):
    """End to end: `xcore show` observes the failure, its delivery to a failing command gives
    up at once (max_attempts = 1), and the same show names it."""
    path = config_dir() / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[[notifications.sinks]]\nname = "cmd"\ntype = "command"\nmax_attempts = 1\n'
                    'events = ["unit_failed"]\ncommand = ["sh", "-c", "exit 4"]\n')
    experiment_id, handle = _experiment()
    fake.set_state(handle, Status.FAILED, "exit code 1", 1)
    out = _show(capsys, str(experiment_id))
    assert f"  notify   1 failed delivery (xcore notifications {experiment_id})" in out.splitlines()
    assert open_store().get_experiment(experiment_id).status is Status.FAILED


def test_the_trouble_count_reads_the_experiments_index_only():
    """Cheap whatever the outbox's size: SQLite answers from the experiment index."""
    open_store().create_experiment("x")
    with closing(sqlite3.connect(store_url().removeprefix("sqlite:///"))) as db:
        plan = " ".join(str(row[-1]) for row in db.execute(f"EXPLAIN QUERY PLAN {TROUBLE}", (1,)))
    assert "SEARCH notifications USING INDEX notifications_by_experiment (experiment_id=?)" in plan
