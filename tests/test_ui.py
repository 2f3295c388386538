"""The dashboard's server side through Starlette's test client (no browser): pages, escaping,
sorting, pagination, cancel with CSRF, read-only mode, the token and the Host check.
The browser tests are in test_ui_browser.py."""

from __future__ import annotations

import os
import re
import sys

import pytest
from starlette.testclient import TestClient  # xcore-core[ui], installed by scripts/test.sh

import xcore as xm
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.testing import fake, plugin_host
from xcore.ui.app import create_app
from xcore.ui.sample import sample_sweep

HOSTILE = "<script>alert(1)</script>\"'&"
TRIAL = ("import json, sys; i = int(sys.argv[1].split('=')[1]); "
         "print('XCORE_RESULT', json.dumps({'loss': 1 / i, 'accuracy': i / 100}))")


def _sweep(n: int, title: str = "ui sweep", hold: bool = False) -> int:
    with xm.create_experiment(title, tags=["ui", HOSTILE]) as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", TRIAL])])
        for i in range(1, n + 1):
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=hold and i == n), args={"i": i, "note": HOSTILE}))
    if not hold:
        experiment.wait_until_complete()
    return experiment.experiment_id


@pytest.fixture
def client(xcore_home):
    plugin_host({"fake": fake})
    yield lambda **options: TestClient(create_app(open_store(), get_host(), **options), base_url="http://127.0.0.1")


def test_pages_escape_hostile_values_and_show_results(client):
    experiment_id = _sweep(3, title=HOSTILE)
    from xcore.runtime import results

    results.collect(open_store(), get_host(), experiment_id)
    http = client()
    for path in ("/", f"/experiments/{experiment_id}", f"/experiments/{experiment_id}/units/1"):
        page = http.get(path)
        assert page.status_code == 200, path
        assert "<script>alert" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    page = http.get(f"/experiments/{experiment_id}?sort=-result:loss").text
    assert [int(u) for u in re.findall(r'data-unit="(\d+)"', page)] == [1, 2, 3]
    assert 'data-result="accuracy"' in page and "tracker.invalid" in page
    chart = http.get(f"/api/experiments/{experiment_id}/chart").json()
    assert chart["results"] == ["loss", "accuracy"] and chart["args"] == ["i", "note"]
    log = http.get(f"/experiments/{experiment_id}/units/2/log").json()
    assert "XCORE_RESULT" in log["text"] and log["done"]


def test_server_side_pagination_and_filters(client):
    experiment_id = sample_sweep(open_store(), 60, tags=["ui"])
    http = client()
    page = http.get(f"/experiments/{experiment_id}?sort=-id&page=2").text
    assert [int(u) for u in re.findall(r'data-unit="(\d+)"', page)] == list(range(10, 0, -1))
    page = http.get(f"/experiments/{experiment_id}?q=seed%3D7").text
    assert re.findall(r'data-unit="(\d+)"', page) == ["7"]
    assert http.get("/?q=nothing-like-this").text.count('data-id="') == 0
    assert http.get("/?q=ui").text.count('data-id="') == 1  # by tag
    sample_sweep(open_store(), 1, title="someone else's", user="other")
    assert re.findall(r'data-id="(\d+)"', http.get("/?user=other").text) == ["2"]
    assert re.findall(r'data-id="(\d+)"', http.get("/?status=completed").text) == ["2"]  # 1 unit, completed
    assert re.findall(r'data-id="(\d+)"', http.get("/?status=failed").text) == ["1"]  # a failed unit among them


def test_cancel_needs_the_csrf_token_and_is_hidden_when_read_only(client):
    experiment_id = _sweep(2, hold=True)
    http = client()
    page = http.get(f"/experiments/{experiment_id}/units/2").text
    token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    url = f"/experiments/{experiment_id}/units/2/cancel"
    assert http.post(url, data={"csrf": "wrong"}, follow_redirects=False).status_code == 403
    assert open_store().work_units(experiment_id, [2])[0].status is not xm.Status.CANCELLED
    assert http.post(url, data={"csrf": token}, follow_redirects=False).status_code == 303
    assert open_store().work_units(experiment_id, [2])[0].status is xm.Status.CANCELLED
    read_only = client(read_only=True)
    assert "Cancel" not in read_only.get(f"/experiments/{experiment_id}").text
    assert read_only.post(url, data={"csrf": token}).status_code == 403


def test_token_and_host_checks(client):
    http = client(token="t" * 20)
    assert http.get("/").status_code == 401
    first = http.get("/?token=" + "t" * 20, follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/"
    assert http.get("/").status_code == 200  # the cookie
    rebinding = client()
    assert rebinding.get("/", headers={"host": "evil.example:8765"}).status_code == 400


def test_missing_experiment_is_a_404_page(client):
    assert client().get("/experiments/99").status_code == 404


def test_xcore_ui_on_a_public_address_requires_a_token(xcore_home):
    import subprocess
    import urllib.error
    import urllib.request

    from xcore.ui.server import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2")
    ui = subprocess.Popen([sys.executable, "-m", "xcore.cli.main", "ui", "--host", "0.0.0.0", "--port", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ui.stdout.readline()
        match = re.search(r"http://[^:/]+:(\d+)/\?token=(\S+)", line)
        assert match, line
        base = f"http://127.0.0.1:{match.group(1)}/"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base)
        assert refused.value.code == 401
        request = urllib.request.Request(base, headers={"Authorization": f"Bearer {match.group(2)}"})
        assert urllib.request.urlopen(request).status == 200
    finally:
        ui.terminate()
        ui.wait(10)
    assert "reachable from other machines" in ui.stderr.read()


def test_a_token_you_give_is_never_printed(xcore_home):
    import subprocess

    ui = subprocess.Popen([sys.executable, "-m", "xcore.cli.main", "ui", "--host", "0.0.0.0", "--port", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "XCORE_UI_TOKEN": "my-own-secret-token-123"})
    try:
        line = ui.stdout.readline()
    finally:
        ui.terminate()
        ui.wait(10)
    assert "http://" in line and "0.0.0.0" not in line  # the machine's name, which a colleague can open
    assert "my-own-secret" not in line + ui.stderr.read() + ui.stdout.read()


def _ui(*args: str, env: dict[str, str] | None = None):
    import subprocess

    return subprocess.Popen([sys.executable, "-m", "xcore.cli.main", "ui", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_xcore_ui_on_loopback_requires_its_token_too_static_files_included(xcore_home):
    """Other users of a shared machine reach 127.0.0.1 as well (issue 30): a token by default,
    printed once in the URL as Jupyter does; the cookie is named by port (cookies ignore ports)."""
    import http.cookiejar
    import urllib.error
    import urllib.request

    ui = _ui()
    try:
        line = ui.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", line)
        assert match, line
        port, token = match.groups()
        for path in ("/", "/static/ui.js", "/api/experiments/1/summary"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}")
            assert refused.value.code == 401, path
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        assert opener.open(f"http://127.0.0.1:{port}/?token={token}").status == 200
        assert [cookie.name for cookie in jar] == [f"xcore_ui_token_{port}"]
        assert opener.open(f"http://127.0.0.1:{port}/static/ui.js").status == 200
    finally:
        ui.terminate()
        ui.wait(10)


def test_no_token_is_for_loopback_only_and_serves_without_one(xcore_home):
    import subprocess
    import urllib.request

    refused = subprocess.run([sys.executable, "-m", "xcore.cli.main", "ui", "--host", "0.0.0.0", "--no-token"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "only on a loopback address" in refused.stderr
    ui = _ui("--no-token")
    try:
        line = ui.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/$", line.strip())
        assert match, line
        assert urllib.request.urlopen(f"http://127.0.0.1:{match.group(1)}/").status == 200
    finally:
        ui.terminate()
        ui.wait(10)


def test_any_loopback_address_is_served(xcore_home):
    """`--host 127.0.0.2` answered 400 to everything: its own name was not an allowed Host."""
    import urllib.request

    ui = _ui("--host", "127.0.0.2")
    try:
        line = ui.stdout.readline()
        match = re.search(r"http://127\.0\.0\.2:(\d+)/\?token=(\S+)", line)
        assert match, line
        request = urllib.request.Request(f"http://127.0.0.2:{match.group(1)}/",
                                         headers={"Authorization": f"Bearer {match.group(2)}"})
        assert urllib.request.urlopen(request).status == 200
    finally:
        ui.terminate()
        ui.wait(10)


def test_the_unit_page_shows_each_attempt_with_its_class_and_log(client):
    """Issue 23: attempts are history, and the dashboard carries them: a job preempted once and
    then completed shows both attempts, the first one's class, and a log link per attempt."""
    from xcore.model.status import Attempt, JobState, Status

    experiment_id = _sweep(2)
    store = open_store()
    [unit] = store.work_units(experiment_id, [1])
    job = unit.jobs[0]
    first = Attempt(number=1, status=Status.FAILED, failure="preempted", exit_code=None, started_at=1000.0,
                    ended_at=1060.0, message="preempted by a higher-priority job")
    store.record_states([(job.id, JobState(Status.COMPLETED, "exit code 0", 0, job.started_at, job.ended_at,
                                           attempt=2, previous_attempts=(first,)))])
    http = client()
    page = http.get(f"/experiments/{experiment_id}/units/1").text
    table = page[page.index('<table class="attempts"'):page.index("</table>", page.index('<table class="attempts"'))]
    assert re.findall(r'data-attempt="(\d+)"', table) == ["1", "2"]
    assert "preempted" in table and "preempted by a higher-priority job" in table and "COMPLETED" in table
    assert "attempt 2</span>" in page
    assert f"/experiments/{experiment_id}/units/1/log?job={job.name}&amp;attempt=1&amp;whole=1" in table
    # The fake kept one log for both attempts (the earlier attempt has no handle of its own): that log.
    assert "XCORE_RESULT" in http.get(f"/experiments/{experiment_id}/units/1/log?attempt=1").json()["text"]
    missing = http.get(f"/experiments/{experiment_id}/units/1/log?attempt=7")
    assert missing.status_code == 404 and "has no attempt 7; it is on attempt 2" in missing.json()["error"]
    assert http.get(f"/experiments/{experiment_id}/units/1/log?attempt=x").status_code == 404
    other = http.get(f"/experiments/{experiment_id}/units/2").text  # one attempt: no attempts table
    assert '<table class="attempts"' not in other and "attempt 1</span>" not in other
