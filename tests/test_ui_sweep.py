"""The dashboard's sweep tools (issue 26), server side: the filter box (the language of ``show
--where``, the same function), the CSV link, the compare view and learning curves. Browser
checks are in test_ui_browser.py."""

from __future__ import annotations

import csv
import io
import json
import re
import sys

import pytest
from starlette.testclient import TestClient  # xcore-core[ui], installed by scripts/test.sh

import xcore as xm
from xcore.cli.main import main
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.runtime import results, series
from xcore.testing import fake, plugin_host
from xcore.ui.app import create_app

TRIAL = ("import json, sys; a = dict(x[2:].split('=') for x in sys.argv[1:]); "
         "lr, seed = float(a['lr']), int(a['seed']); "
         "[print('XCORE_RESULT', json.dumps({'step': s, 'loss': lr * 10 / (s + 1) + seed / 100})) "
         " for s in range(0, 1000, 10 if seed else 1)]; "
         "sys.exit('diverged: NaN loss') if lr > 0.5 and seed == 1 else None")


@pytest.fixture
def sweep(xcore_home):
    plugin_host({"fake": fake})
    with xm.create_experiment("ui sweep tools") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", TRIAL])])
        for lr in (0.01, 0.03, 0.1, 0.9):
            for seed in range(3):
                experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"lr": lr, "seed": seed, "tag": "<b>x</b>"}))
    experiment.wait_until_complete()
    results.collect(open_store(), get_host(), experiment.experiment_id)
    http = TestClient(create_app(open_store(), get_host()), base_url="http://127.0.0.1")
    return experiment.experiment_id, http


def _units(page: str) -> list[int]:
    return [int(u) for u in re.findall(r'data-unit="(\d+)"', page)]


def _show_json(capsys, *args: str) -> list[dict]:
    capsys.readouterr()
    assert main(["show", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["work_units"]


def test_the_filter_box_selects_what_the_same_filter_in_python_selects(sweep, capsys):
    experiment_id, http = sweep
    everything = _show_json(capsys, str(experiment_id))
    expected = [u["id"] for u in everything if u["args"]["lr"] <= 0.03 and u["results"]["loss"] < 0.05]
    assert 0 < len(expected) < len(everything)
    page = http.get(f"/experiments/{experiment_id}", params={"where": "lr<=0.03 loss<0.05"})
    assert page.status_code == 200 and _units(page.text) == expected
    assert f"{len(expected)} of 12 work units" in page.text
    assert _units(http.get(f"/experiments/{experiment_id}/table", params={"where": "error~nan"}).text) == [11]
    assert [u["id"] for u in _show_json(capsys, str(experiment_id), "--where", "error~nan")] == [11]


@pytest.mark.parametrize("path", ["", "/table", "/csv"])
def test_a_bad_filter_is_a_400_with_its_message(sweep, path):
    experiment_id, http = sweep
    answer = http.get(f"/experiments/{experiment_id}{path}", params={"where": "lr<=<script>"})
    assert answer.status_code == 400
    assert "expected a value, not another operator" in answer.text
    assert "<script>" not in answer.text or answer.headers["content-type"].startswith("text/plain")  # as text
    unknown = http.get(f"/experiments/{experiment_id}{path}", params={"where": "lx<1"})
    assert unknown.status_code == 400
    assert "unknown name &#39;lx&#39;" in unknown.text or "unknown name 'lx'" in unknown.text
    assert http.get(f"/api/experiments/{experiment_id}/curves", params={"where": "lr<"}).status_code == 400


def test_the_csv_link_downloads_what_show_csv_writes(sweep, capsys):
    experiment_id, http = sweep
    page = http.get(f"/experiments/{experiment_id}", params={"where": "seed=0", "sort": "-result:loss"}).text
    link = re.search(r'id="csv-link" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    answer = http.get(link)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    assert f'filename="experiment-{experiment_id}.csv"' in answer.headers["content-disposition"]
    capsys.readouterr()
    assert main(["show", str(experiment_id), "--where", "seed=0", "--sort=-loss", "--csv"]) == 0
    assert answer.text == capsys.readouterr().out
    rows = list(csv.reader(io.StringIO(answer.text)))
    assert [r[0] for r in rows[1:]] == ["10", "7", "4", "1"]
    grouped = http.get(f"/experiments/{experiment_id}/csv", params={"group_by": "lr", "columns": "loss"}).text
    assert grouped.splitlines()[0] == "lr,loss_mean,loss_std,loss_min,loss_max"
    assert http.get(f"/experiments/{experiment_id}/csv", params={"columns": "nope"}).status_code == 400


def test_compare_shows_the_arguments_that_differ_and_the_results(sweep):
    experiment_id, http = sweep
    page = http.get(f"/experiments/{experiment_id}/compare?unit=1&unit=4&unit=5")
    assert page.status_code == 200
    table = page.text.split('id="compare-table"')[1].split("</table>")[0]
    assert re.findall(r'<tr class="differs"><th>(\w+)</th>', table) == ["lr", "seed"]
    assert re.findall(r'<tr class="result"><th>(\w+)</th>', table) == ["step", "loss"]
    assert "&lt;b&gt;x&lt;/b&gt;" in page.text.split('id="same-args"')[1]  # the same everywhere: apart, escaped
    assert 'id="series-data"' in page.text and "uPlot.iife.min.js" in page.text
    assert http.get(f"/experiments/{experiment_id}/compare").status_code == 400
    assert http.get(f"/experiments/{experiment_id}/compare?unit=x").status_code == 400
    assert http.get(f"/experiments/{experiment_id}/compare?unit=1&unit=99").status_code == 404


def test_curves_are_stored_downsampled_and_served(sweep):
    experiment_id, http = sweep
    stored = open_store().series(experiment_id)
    dense, sparse = stored[1]["loss"], stored[2]["loss"]  # 1000 steps and 100 steps
    assert len(dense) <= series.MAX_POINTS + 1 and dense[0][0] == 0 and dense[-1][0] == 999
    assert [p[0] for p in sparse] == list(range(0, 1000, 10))  # few enough: every point
    assert dense == sorted(dense)
    top = http.get(f"/api/experiments/{experiment_id}/curves",
                   params={"where": "lr=0.1", "sort": "-result:loss", "top": "2"}).json()
    assert top["names"] == ["loss"] and [u["id"] for u in top["units"]] == [9, 8]
    chosen = http.get(f"/api/experiments/{experiment_id}/curves?unit=3&unit=1").json()
    assert [u["id"] for u in chosen["units"]] == [3, 1] and chosen["units"][1]["series"]["loss"] == \
        [list(p) for p in dense]
    unit = http.get(f"/experiments/{experiment_id}/units/1").text
    assert 'id="series-data"' in unit and "uPlot.iife.min.js" in unit


def test_a_series_keeps_its_first_and_last_points_within_bounds():
    line = series.Series()
    for step in range(1_000_003):
        line.add(step, step * 2.0)
    points = line.finished()
    assert len(points) <= series.MAX_POINTS + 1 and points[0] == (0, 0.0) and points[-1] == (1_000_002, 2_000_004.0)
    assert len(line.points) < 2 * series.MAX_POINTS  # memory stayed bounded while reading
