"""Notifications (issue 28): events from job changes, recorded once in the store's outbox and
delivered once to each configured sink, by whichever observer sees them first."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from notify_helpers import receiver

import xcore as xm
from core_helpers import start_xcore_fake
from xcore.errors import ConfigurationError
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.model.status import JobState, Status
from xcore.paths import config_dir
from xcore.runtime import notifications
from xcore.runtime.notifications import config, sinks
from xcore.runtime.tracking import refresh_jobs
from xcore.testing import fake, plugin_host

SECRET = "s3cret-signing-key"


def _configure(text: str) -> Path:
    path = config_dir() / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _webhook(url: str, **extra: object) -> str:
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in extra.items())
    return (f'[[notifications.sinks]]\nname = "hook"\ntype = "webhook"\nurl = "{url}"\n'
            f'secret_env = "XCORE_TEST_HOOK_SECRET"\n{lines}')


def _sweep(count: int, title: str = "sweep") -> tuple[int, list[object]]:
    """``count`` held fake jobs, one per unit; the experiment id and their handles in unit order."""
    plugin_host({"fake": fake})
    with xm.create_experiment(title) as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for i in range(count):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True), args={"trial": i}))
    jobs = sorted(experiment._all_jobs(), key=lambda j: j.work_unit_id)
    return experiment.experiment_id, [get_host().serializer.load(j.handle) for j in jobs]


def _holds_store_open(pid: int) -> bool:
    """Whether the process has the store's file open (it reached its polling loop)."""
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}").endswith("xcore.db") for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_two_observers_deliver_one_signed_event_per_failed_unit_and_one_end(monkeypatch):
    """A 10-trial sweep with 2 failures, watched by two `xcore wait` at once: the receiver gets
    exactly 3 signed events (2 unit_failed, 1 experiment_ended with the counts)."""
    monkeypatch.setenv("XCORE_TEST_HOOK_SECRET", SECRET)
    with receiver() as hook:
        _configure(_webhook(hook.url, events=["unit_failed", "experiment_ended"]))
        experiment_id, handles = _sweep(10)
        observers = [start_xcore_fake("wait", str(experiment_id)) for _ in range(2)]
        deadline = time.monotonic() + 60
        while not all(_holds_store_open(p.pid) for p in observers):
            assert time.monotonic() < deadline and all(p.poll() is None for p in observers)
            time.sleep(0.02)
        for i, handle in enumerate(handles):
            failed = i in (3, 7)
            status = Status.FAILED if failed else Status.COMPLETED
            fake.set_state(handle, status, f"exit code {int(failed)}", int(failed))
        for observer in observers:
            out, err = observer.communicate(timeout=120)
            assert observer.returncode == 1, err  # some failed
            assert "warning" not in err, err
        requests = hook.wait_for(3)
        store = open_store()
        assert [n.state for n in store.notifications(experiment_id)] == ["sent"] * 3
    assert len(requests) == 3, [body for _, body in requests]
    events = []
    for headers, body in requests:
        assert sinks.verify(SECRET, headers["x-xcore-signature"], body)
        assert not sinks.verify("another secret", headers["x-xcore-signature"], body)
        event = json.loads(body)
        assert event["schema"] == 1 and headers["x-xcore-event"] == event["id"]
        events.append(event)
    by_id = {e["id"]: e for e in events}
    assert sorted(by_id) == [f"exp-{experiment_id}/ended", f"exp-{experiment_id}/unit-4/failed/attempt-1",
                             f"exp-{experiment_id}/unit-8/failed/attempt-1"]
    ended = by_id[f"exp-{experiment_id}/ended"]
    assert ended["type"] == "experiment_ended" and ended["counts"] == {"COMPLETED": 8, "FAILED": 2}
    failed = by_id[f"exp-{experiment_id}/unit-4/failed/attempt-1"]
    assert failed["unit"]["exit_code"] == 1 and failed["experiment"]["title"] == "sweep"


def _observe(experiment_id: int) -> None:
    """One observer cycle in this process: refresh the experiment's jobs (the duty runs)."""
    store = open_store()
    refresh_jobs(store, get_host(), store.active_jobs([experiment_id]))


def test_a_receiver_that_answers_500_twice_gets_the_event_on_the_third_try(monkeypatch):
    monkeypatch.setenv("XCORE_TEST_HOOK_SECRET", SECRET)
    with receiver(codes=[500, 500]) as hook:
        _configure(_webhook(hook.url, backoff_secs=0, events=["unit_failed"]))
        experiment_id, [handle] = _sweep(1)
        fake.set_state(handle, Status.FAILED, "exit code 2", 2)
        _observe(experiment_id)  # the failure recorded; tries until the budget ends or it is sent
        requests = hook.wait_for(3)
        [row] = open_store().notifications(experiment_id)
    assert len(requests) == 3 and len({body for _, body in requests}) == 1  # the same event, thrice
    assert (row.state, row.attempts, row.last_error) == ("sent", 3, "HTTP 500 from 127.0.0.1")


def test_a_failing_sink_is_retried_later_by_another_observer_and_its_failure_shown(monkeypatch, capsys):
    """With a backoff, a failed try is not repeated in the same cycle: the row waits, pending,
    with its error; a later cycle (here `tick`, as `xcore watch` calls it) delivers it."""
    from xcore.cli.main import main

    monkeypatch.setenv("XCORE_TEST_HOOK_SECRET", SECRET)
    with receiver(codes=[503]) as hook:
        _configure(_webhook(hook.url, backoff_secs=0.2, events=["unit_failed"]))
        experiment_id, [handle] = _sweep(1)
        fake.set_state(handle, Status.FAILED, "exit code 2", 2)
        _observe(experiment_id)
        store = open_store()
        [row] = store.notifications(experiment_id)
        assert (row.state, row.attempts, row.last_error) == ("pending", 1, "HTTP 503 from 127.0.0.1")
        assert main(["notifications", "--json"]) == 0
        [shown] = json.loads(capsys.readouterr().out)
        assert (shown["state"], shown["last_error"], shown["sink"]) == ("pending", "HTTP 503 from 127.0.0.1", "hook")
        assert "t0ps3cret" not in json.dumps(shown)  # the URL's token is nowhere
        deadline = time.monotonic() + 30
        while store.notifications(experiment_id)[0].state != "sent":  # due again once the backoff passed
            assert time.monotonic() < deadline
            notifications.tick(store, get_host(), [experiment_id])
            time.sleep(0.05)
        assert len(hook.requests) == 2


def test_a_sink_that_hangs_holds_an_observer_no_longer_than_the_budget(monkeypatch):
    import threading

    release = threading.Event()
    with receiver(hold=lambda: release.wait(30)) as hook:
        unsigned = _webhook(hook.url, timeout=30, events=["unit_failed"]).replace(
            'secret_env = "XCORE_TEST_HOOK_SECRET"\n', "")
        _configure("[notifications]\nbudget_secs = 1\n" + unsigned)
        experiment_id, [handle] = _sweep(1)
        fake.set_state(handle, Status.FAILED, "exit code 2", 2)
        started = time.monotonic()
        _observe(experiment_id)
        took = time.monotonic() - started
        release.set()
    assert took < 10, took
    [row] = open_store().notifications(experiment_id, states=["pending"])
    assert "timed out" in row.last_error or "cannot reach" in row.last_error


def test_filters_by_tag_user_and_event_type(monkeypatch):
    from xcore.runtime.notifications import delivery

    _configure('[[notifications.sinks]]\nname = "a"\ntype = "command"\ncommand = ["true"]\ntags = ["prod"]\n'
               '[[notifications.sinks]]\nname = "b"\ntype = "command"\ncommand = ["true"]\nusers = ["bob"]\n'
               'events = ["experiment_ended"]\n')
    loaded, _ = notifications.configured()
    event = {"id": "e/1", "type": "unit_failed", "experiment": {"id": 1, "tags": ["prod"], "user": "alice"}}
    store = open_store()
    store.create_experiment("x")
    assert delivery.record(store, loaded, [event]) == 1
    assert [n.sink for n in store.notifications()] == ["a"]
    ended = {**event, "id": "e/2", "type": "experiment_ended", "experiment": {"id": 1, "tags": [], "user": "bob"}}
    assert delivery.record(store, loaded, [ended]) == 1


def test_failures_threshold_and_retry_events_have_stable_ids():
    from xcore.runtime.notifications import events
    from xcore.store.records import ExperimentRecord, JobRecord

    record = ExperimentRecord(4, "t", status_counts={"FAILED": 3, "RUNNING": 1}, launch_status="LAUNCHED")
    found = events.experiment_events(record, failures=3)
    assert [e["id"] for e in found] == ["exp-4/failures-3"]  # not ended: a unit still runs
    assert events.experiment_events(record, failures=4) == []
    job = JobRecord(9, 4, 2, "train", "k", {}, {}, [], {}, status=Status.PENDING)
    assert events.unit_events(record, [], [job]) == []  # attempt 1 (a store that counts none): no retry
    retried = SimpleNamespace(id=9, work_unit_id=2, name="train", status=Status.PENDING, message="", attempt=2)
    [retry] = events.unit_events(record, [], [retried])  # type: ignore[list-item]
    assert retry["id"] == "exp-4/unit-2/job-9/retry/attempt-2" and retry["type"] == "retry"


def test_a_job_pending_longer_than_the_limit_makes_one_waiting_event(monkeypatch):
    _configure('[notifications]\nwaiting_secs = 0.5\n'
               '[[notifications.sinks]]\nname = "log"\ntype = "command"\ncommand = ["true"]\n')
    experiment_id, [handle] = _sweep(1)
    fake.set_state(handle, Status.PENDING, "pending: Resources")
    store = open_store()
    _observe(experiment_id)
    assert store.notifications(experiment_id) == []  # not waited long enough yet
    job = store.active_jobs([experiment_id])[0]
    launched = job.launched_at or job.created_at
    while time.time() - launched <= 0.5:
        time.sleep(0.05)
    notifications.tick(store, get_host(), [experiment_id])
    notifications.tick(store, get_host(), [experiment_id])
    [row] = store.notifications(experiment_id)
    assert (row.event_type, row.state) == ("waiting", "sent")
    assert row.event_id == f"exp-{experiment_id}/unit-1/job-{job.id}/waiting/attempt-1"
    assert "pending: Resources" in json.loads(row.body)["text"]


def test_the_command_sink_gets_the_event_on_stdin_with_hostile_strings_intact(tmp_path):
    out = tmp_path / "got.json"
    script = tmp_path / "sink.py"
    script.write_text("import os, sys\nopen(sys.argv[1], 'wb').write(sys.stdin.buffer.read())\n"
                      "open(sys.argv[1] + '.env', 'w').write(os.environ['XCORE_EVENT_ID'])\n")
    import sys

    hostile = "unit 'x' \"y\" $(rm -rf ~) `id` ; | & \n\t é 🙂 \\ %s"
    _configure('[[notifications.sinks]]\nname = "cmd"\ntype = "command"\n'
               f'command = {json.dumps([sys.executable, str(script), str(out)])}\n')
    experiment_id, [handle] = _sweep(1, title=hostile)
    fake.set_state(handle, Status.FAILED, hostile, 3)
    _observe(experiment_id)
    event = json.loads(out.read_bytes())
    assert event["experiment"]["title"] == hostile and event["unit"]["message"] == hostile
    assert Path(str(out) + ".env").read_text() == event["id"]


def test_a_failing_command_records_its_exit_code_and_last_line(tmp_path, capsys):
    from xcore.cli.main import main

    _configure('[[notifications.sinks]]\nname = "cmd"\ntype = "command"\nmax_attempts = 1\n'
               'events = ["unit_failed"]\ncommand = ["sh", "-c", "echo nope >&2; exit 4"]\n')
    experiment_id, [handle] = _sweep(1)
    fake.set_state(handle, Status.FAILED, "exit code 1", 1)
    _observe(experiment_id)
    [row] = open_store().notifications(experiment_id)
    assert (row.state, row.last_error) == ("failed", "sh exited with 4: nope")
    assert main(["notifications", str(experiment_id), "--state", "failed"]) == 0
    [header, line] = capsys.readouterr().out.splitlines()
    assert header.split() == ["EVENT", "SINK", "STATE", "TRIES", "LAST", "ERROR"]
    assert line.split() == [row.event_id, "cmd", "failed", "1", "sh", "exited", "with", "4:", "nope"]


def test_slack_payload_is_text_and_blocks_with_slack_escapes():
    payload = sinks.SlackSink.payload({"id": "e/1", "text": "a <b> & c"})
    assert payload["text"] == "a &lt;b&gt; &amp; c"
    assert payload["blocks"][0] == {"type": "section", "text": {"type": "mrkdwn", "text": "a &lt;b&gt; &amp; c"}}


def test_signature_is_hmac_sha256_over_timestamp_and_body():
    import hashlib
    import hmac

    body = b'{"id":"e/1"}'
    expected = hmac.new(b"k", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert sinks.signature("k", 1700000000, body) == f"t=1700000000,v1={expected}"
    assert sinks.verify("k", f"t=1700000000,v1={expected}", body, now=1700000100)
    assert not sinks.verify("k", f"t=1700000000,v1={expected}", body, now=1700001000)  # too old
    assert not sinks.verify("k", f"t=1700000000,v1={expected}", body + b" ", now=1700000000)


@pytest.mark.parametrize(("text", "fragment"), [
    ('[notifications]\nfailure = 3\n', "unknown key 'failure'"),
    ('[[notifications.sinks]]\ntype = "webhook"\n', "#1 in"),
    ('[[notifications.sinks]]\nname = "h"\ntype = "webhook"\nurll = "http://x"\n', "unknown key 'urll' for type"),
    ('[[notifications.sinks]]\nname = "h"\ntype = "webhook"\nurl = "ftp://x"\n', "url must be an http"),
    ('[[notifications.sinks]]\nname = "h"\ntype = "pager"\n', "unknown type 'pager'"),
    ('[[notifications.sinks]]\nname = "h"\ntype = "command"\ncommand = "notify --all"\n',
     "command must be a list of strings"),
    ('[[notifications.sinks]]\nname = "h"\ntype = "command"\ncommand = ["x"]\nevents = ["failed"]\n',
     "events has 'failed'"),
    ('[[notifications.sinks]]\nname = "h"\ntype = "slack"\nurl_env = "XCORE_TEST_UNSET_VAR"\n',
     "$XCORE_TEST_UNSET_VAR, which is not set"),
    ('[[notifications.sinks]]\nname = "h"\ntype = "command"\ncommand = ["x"]\nmax_attempts = 0\n',
     "max_attempts = 0 must be a whole number >= 1"),
    ('[[notifications.sinks]]\nname = "m"\ntype = "email"\nhost = "h"\nfrom = "a@b"\nto = "c@d"\n'
     'cafile = "/nonexistent/ca.pem"\n', "cafile /nonexistent/ca.pem is not a file"),
    ('[notifications\n', "is not valid TOML"),
])
def test_a_bad_config_is_one_error_naming_the_sink_and_key(text, fragment):
    path = _configure(text)
    with pytest.raises(ConfigurationError) as caught:
        notifications.configured(None, path)
    assert fragment in str(caught.value) and str(path) in str(caught.value)


def test_a_bad_config_warns_once_and_never_breaks_the_observer(capsys):
    _configure('[[notifications.sinks]]\nname = "h"\ntype = "webhook"\nurl = "http://x"\nsecret = 3\n')
    experiment_id, handles = _sweep(2)
    for handle in handles:
        fake.set_state(handle, Status.FAILED, "exit code 1", 1)
        _observe(experiment_id)
    err = capsys.readouterr().err
    assert err.count("notifications are off") == 1 and "[[notifications.sinks]] 'h'" in err


def test_secrets_never_reach_a_message_or_the_store(monkeypatch, capsys):
    monkeypatch.setenv("XCORE_TEST_HOOK_SECRET", SECRET)
    _configure(_webhook("http://127.0.0.1:9/never?token=t0ps3cret", max_attempts=1, timeout=1,
                        events=["unit_failed"]))
    loaded, built = notifications.configured()
    assert SECRET not in repr(built) and "t0ps3cret" not in repr(built)
    _configure(_webhook("http://127.0.0.1:9/", events=["unit_failed"]).replace(
        'secret_env = "XCORE_TEST_HOOK_SECRET"', f'secret = "{SECRET}"'))
    in_file, _ = notifications.configured()
    assert SECRET not in repr(in_file) and in_file.sinks[0].options["secret"] == SECRET
    _configure(_webhook("http://127.0.0.1:9/never?token=t0ps3cret", max_attempts=1, timeout=1,
                        events=["unit_failed"]))
    experiment_id, [handle] = _sweep(1)
    fake.set_state(handle, Status.FAILED, "exit code 1", 1)
    _observe(experiment_id)
    [row] = open_store().notifications(experiment_id)
    assert row.state == "failed" and "t0ps3cret" not in row.last_error and SECRET not in row.body
    err = capsys.readouterr().err  # a delivery given up on is said once, where it happened
    assert f"notification {row.event_id} to 'hook' failed after 1 tries: cannot reach 127.0.0.1" in err
    assert "t0ps3cret" not in err and SECRET not in err


def test_no_config_means_no_rows_and_no_cost():
    experiment_id, [handle] = _sweep(1)
    fake.set_state(handle, Status.FAILED, "exit code 1", 1)
    _observe(experiment_id)
    assert open_store().notifications() == []
    assert notifications.configured() == (config.NotificationConfig(), {})


def test_a_duty_sees_the_store_state_after_its_own_record():
    """Each observer runs the duty after its own commit, so the last of two recorders of an
    experiment's last jobs sees them all (the end is never missed between them)."""
    _configure('[[notifications.sinks]]\nname = "c"\ntype = "command"\ncommand = ["true"]\n'
               'events = ["experiment_ended"]\n')
    experiment_id, handles = _sweep(2)
    store = open_store()
    [first, second] = store.active_jobs([experiment_id])
    store.record_states([(first.id, JobState(Status.COMPLETED, "done", 0))])  # another process's record
    fake.set_state(handles[0], Status.COMPLETED, "done", 0)
    fake.set_state(handles[1], Status.COMPLETED, "done", 0)
    refresh_jobs(store, get_host(), [second])
    assert [n.event_type for n in store.notifications(experiment_id)] == ["experiment_ended"]


def test_the_email_sink_sends_one_message_per_event_over_smtp(monkeypatch):
    import base64
    import email
    from email import policy

    from notify_helpers import smtp_server

    monkeypatch.setenv("XCORE_TEST_SMTP_PASSWORD", "pw-s3cret")
    with smtp_server() as mailbox:
        _configure('[[notifications.sinks]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\n'
                   f'port = {mailbox.port}\nfrom = "xcore@lab.invalid"\nto = ["alice@lab.invalid", "bob@lab.invalid"]\n'
                   'username = "alice"\npassword_env = "XCORE_TEST_SMTP_PASSWORD"\nevents = ["unit_failed"]\n')
        experiment_id, [handle] = _sweep(1, title="mail ✓")
        fake.set_state(handle, Status.FAILED, "exit code 5", 5)
        _observe(experiment_id)
        [(sender, recipients, data)] = mailbox.messages
        [auth] = mailbox.auth
    assert sender == "xcore@lab.invalid" and recipients == ["alice@lab.invalid", "bob@lab.invalid"]
    assert base64.b64decode(auth.split()[-1]).split(b"\0")[1:] == [b"alice", b"pw-s3cret"]
    message = email.message_from_bytes(data, policy=policy.default)
    event_id = f"exp-{experiment_id}/unit-1/failed/attempt-1"
    assert message["X-Xcore-Event"] == event_id and "mail ✓" in message["Subject"]
    content = message.get_content().replace("\r\n", "\n")  # as sent over SMTP
    assert json.loads(content.split("\n\n", 1)[1])["id"] == event_id
    [row] = open_store().notifications(experiment_id)
    assert row.state == "sent"


def test_a_plugin_adds_a_sink_type_through_the_hook():
    from xcore.paths import plugin_state_dir

    _configure('[[notifications.sinks]]\nname = "lab"\ntype = "fake"\nevents = ["unit_failed"]\n')
    experiment_id, [handle] = _sweep(1)
    fake.set_state(handle, Status.FAILED, "exit code 1", 1)
    _observe(experiment_id)
    [line] = (plugin_state_dir("fake") / "notifications.jsonl").read_text().splitlines()
    assert json.loads(line)["id"] == f"exp-{experiment_id}/unit-1/failed/attempt-1"
    _configure('[[notifications.sinks]]\nname = "lab"\ntype = "fake"\ncolour = "red"\n')
    with pytest.raises(ConfigurationError, match="unknown key 'colour' for type 'fake'"):
        notifications.configured(get_host())


def test_jobs_that_ended_inside_the_launch_script_are_notified_when_it_exits(tmp_path):
    """A script that waits for its jobs inside its experiment: the wait records the failure (and
    notifies it), but the end cannot be told from a pause between adds until the `with` block
    exits, which notices it."""
    out = tmp_path / "events.jsonl"
    script = tmp_path / "sink.py"
    script.write_text("import sys\nopen(sys.argv[1], 'ab').write(sys.stdin.buffer.read() + b'\\n')\n")
    import sys

    _configure('[[notifications.sinks]]\nname = "cmd"\ntype = "command"\n'
               f'command = {json.dumps([sys.executable, str(script), str(out)])}\n')
    plugin_host({"fake": fake})
    with xm.create_experiment("synchronous") as experiment:
        [ok, bad] = experiment.package([xm.binary(fake.FakeSpec(), "true"), xm.binary(fake.FakeSpec(), "false")])
        experiment.add(xm.Job(ok, fake.FakeExecutor()))
        experiment.add(xm.Job(bad, fake.FakeExecutor()))
        experiment.wait_until_complete()
        assert [json.loads(line)["type"] for line in out.read_text().splitlines()] == ["unit_failed"]
    ids = sorted(json.loads(line)["id"] for line in out.read_text().splitlines())
    assert ids == [f"exp-{experiment.experiment_id}/ended", f"exp-{experiment.experiment_id}/unit-2/failed/attempt-1"]


def test_the_slack_sink_posts_text_and_blocks_to_the_webhook_from_the_environment(monkeypatch):
    with receiver() as hook:
        monkeypatch.setenv("XCORE_TEST_SLACK_URL", hook.url)
        _configure('[[notifications.sinks]]\nname = "slack"\ntype = "slack"\nurl_env = "XCORE_TEST_SLACK_URL"\n'
                   'events = ["experiment_ended"]\n')
        experiment_id, [handle] = _sweep(1, title="a <b> & c")
        fake.set_state(handle, Status.COMPLETED, "exit code 0", 0)
        _observe(experiment_id)
        [(headers, body)] = hook.wait_for(1)
    payload = json.loads(body)
    assert payload["text"] == f"xcore experiment {experiment_id} (a &lt;b&gt; &amp; c): ended: completed (1 completed)"
    assert payload["blocks"][0]["text"]["text"] == payload["text"]
    assert "x-xcore-signature" not in headers


def test_the_email_sink_upgrades_to_tls_and_checks_the_certificate(tmp_path):
    import subprocess

    from notify_helpers import smtp_server

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                           "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                           "-out", str(cert)], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    entry = ('[[notifications.sinks]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {port}\n'
             'starttls = true\nfrom = "x@lab.invalid"\nto = "a@lab.invalid"\nevents = ["unit_failed"]\n'
             'max_attempts = 1\n{cafile}')
    with smtp_server(tls=(str(cert), str(key))) as mailbox:
        _configure(entry.format(port=mailbox.port, cafile=f'cafile = "{cert}"\n'))
        experiment_id, [handle] = _sweep(1)
        fake.set_state(handle, Status.FAILED, "exit code 5", 5)
        _observe(experiment_id)
        assert mailbox.encrypted == [True]
        _configure(entry.format(port=mailbox.port, cafile=""))  # the system's CAs do not know this one
        second, [handle] = _sweep(1)
        fake.set_state(handle, Status.FAILED, "exit code 5", 5)
        _observe(second)
        assert mailbox.encrypted == [True]
    [row] = open_store().notifications(second)
    assert row.state == "failed" and "CERTIFICATE_VERIFY_FAILED" in row.last_error
