"""What a sweep of the dashboard found (issue 26): the cancel button of an experiment whose
units run on after one failed, 500s for out-of-range ids, pages and non-ASCII secrets, and
a log view that showed colour codes raw, ran ``\\r`` progress lines together, cut long logs
silently and re-read the whole file every poll."""

from __future__ import annotations

import sys

import pytest
from starlette.testclient import TestClient

import xcore as xm
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.testing import fake, plugin_host
from xcore.ui import logs
from xcore.ui.app import create_app
from xcore.ui.sample import sample_sweep

TOKEN = "t" * 20


@pytest.fixture
def client(xcore_home):
    plugin_host({"fake": fake})
    return lambda **options: TestClient(create_app(open_store(), get_host(), **options), base_url="http://127.0.0.1",
                                        raise_server_exceptions=False)


def test_cancel_experiment_is_offered_while_units_run_in_a_failed_experiment(client):
    experiment_id = sample_sweep(open_store(), 6)  # unit 3 failed, unit 4 runs, unit 5 pending
    record = open_store().get_experiment(experiment_id)
    assert record.status is xm.Status.FAILED and record.has_active_units
    assert 'id="cancel-experiment"' in client().get(f"/experiments/{experiment_id}").text
    done = sample_sweep(open_store(), 3)  # completed and failed only: nothing to cancel
    assert 'id="cancel-experiment"' not in client().get(f"/experiments/{done}").text


def test_ids_beyond_64_bits_are_404_not_500(client):
    experiment_id = sample_sweep(open_store(), 2)
    http = client()
    huge = 2**63
    for path in (f"/experiments/{huge}", f"/experiments/{huge}/table", f"/experiments/{huge}/units/1",
                 f"/experiments/{experiment_id}/units/{huge}", f"/experiments/{experiment_id}/units/{huge}/log",
                 f"/api/experiments/{huge}/summary", f"/api/experiments/{huge}/chart"):
        assert http.get(path).status_code == 404, path
    for path in (f"/experiments/{huge}/cancel", f"/experiments/{experiment_id}/units/{huge}/cancel"):
        assert http.post(path, data={"csrf": "x"}).status_code == 404, path
    assert http.get(f"/experiments/{2**63 - 1}").status_code == 404  # the largest id: simply absent


def test_a_huge_page_number_is_an_empty_page(client):
    experiment_id = sample_sweep(open_store(), 2)
    http = client()
    assert http.get(f"/?page={10**18}").status_code == 200
    assert http.get(f"/experiments/{experiment_id}?page={10**18}").status_code == 200


def test_non_ascii_csrf_and_token_are_refused_not_500(client):
    experiment_id = sample_sweep(open_store(), 6)
    http = client()
    assert http.post(f"/experiments/{experiment_id}/cancel", data={"csrf": "é"}).status_code == 403
    guarded = client(token=TOKEN)
    assert guarded.get("/?token=%C3%A9").status_code == 401
    assert guarded.get("/", headers={"authorization": "Bearer é".encode()}).status_code == 401
    assert guarded.get("/", headers={"cookie": "xcore_ui_token=é".encode()}).status_code == 401
    assert guarded.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_log_text_is_cleaned_for_display():
    assert logs.clean("\x1b[31mred\x1b[0m \x1b]0;title\x07done\n") == "red done\n"
    assert logs.clean(" 10%\r 50%\r100%\nnext\r\n") == "100%\nnext\n"
    assert logs.clean("bell\x07 back\x08\n") == "bell back\n"


def _one_job_log(tmp_path) -> tuple[int, str]:
    """A finished one-unit experiment and its job's local log file."""
    with xm.create_experiment("log") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", "print('hi')"])])
        experiment.add(xm.Job(exe, fake.FakeExecutor()))
    experiment.wait_until_complete()
    [job] = open_store().work_units(experiment.experiment_id, [1])[0].jobs
    assert job.log_path
    return experiment.experiment_id, job.log_path


def test_log_view_shows_the_last_state_of_progress_lines_without_colour_codes(client, tmp_path):
    experiment_id, path = _one_job_log(tmp_path)
    with open(path, "wb") as log:
        log.write(b"\x1b[32mepoch 1\x1b[0m\r\n 10%|#   |\r 90%|### |\r100%|####|\ndone")
    answer = client().get(f"/experiments/{experiment_id}/units/1/log").json()
    assert answer["text"] == "epoch 1\n100%|####|\ndone" and answer["done"]


def test_a_running_jobs_unfinished_line_is_sent_apart_and_read_again():
    blob = b"line\n 30%\r 60%"
    answer = logs.chunk(blob, 0, done=False)
    assert answer == {"text": "line\n", "partial": " 60%", "start": 0, "offset": 5}


def test_a_long_log_says_it_is_cut_and_offers_the_whole(client, tmp_path):
    experiment_id, path = _one_job_log(tmp_path)
    line = b"x" * 99 + b"\n"
    with open(path, "wb") as log:
        log.write(line * 300_000)  # 30 MB
    http = client()
    answer = http.get(f"/experiments/{experiment_id}/units/1/log").json()
    assert answer["size"] == 30_000_000 and answer["start"] > 0 and answer["start"] % 100 == 0
    assert len(answer["text"].encode()) <= 2 * 1024 * 1024 and answer["text"].startswith("x")
    whole = http.get(f"/experiments/{experiment_id}/units/1/log?whole=1")
    assert whole.status_code == 200 and len(whole.content) == 30_000_000
    assert whole.headers["content-type"].startswith("text/plain")
    page = http.get(f"/experiments/{experiment_id}/units/1").text
    assert 'id="log-skipped"' in page and 'id="log-whole"' in page


def test_a_poll_reads_the_local_log_from_its_offset(client, tmp_path, monkeypatch):
    experiment_id, path = _one_job_log(tmp_path)
    host = get_host()

    def streamed_whole(*args, **kwargs):
        raise AssertionError("a local log is read from the offset, not streamed whole again")

    monkeypatch.setattr(host, "job_logs", streamed_whole)
    http = client()
    first = http.get(f"/experiments/{experiment_id}/units/1/log").json()
    assert first["text"] == "hi\n"
    with open(path, "ab") as log:
        log.write(b"more\n")
    second = http.get(f"/experiments/{experiment_id}/units/1/log?offset={first['offset']}").json()
    assert second["text"] == "more\n" and second["start"] == first["offset"]
    beyond = http.get(f"/experiments/{experiment_id}/units/1/log?offset={10**30}").json()
    assert beyond["text"] == "" and beyond["offset"] == first["offset"] + 5


def test_a_streamed_log_is_cleaned_and_cut_the_same_way():
    answer = logs.read_text("a\x1b[1mb\x1b[0m\n" + "y" * 50 + "\n", 0, 20, done=True)
    assert answer["size"] == 62 and answer["start"] == 42 and answer["text"] == "y" * 19 + "\n"
    assert logs.read_text("a\x1b[1mb\x1b[0m\n", 0, 100, done=True)["text"] == "ab\n"
    assert logs.read_text("a\r b\n", 0, 100, done=True)["text"] == " b\n"
