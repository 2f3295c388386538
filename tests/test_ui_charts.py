"""The dashboard's charts, server side (issue 26): uPlot instead of Plotly, loaded only where a
chart is drawn; the chart endpoint as columns, sampled for a big sweep, with a timeline counted
on the server; grouped tables and each group's mean curve with its std. Browser checks are in
test_ui_browser.py."""

from __future__ import annotations

import math
import re
import statistics
import time

import pytest
from starlette.testclient import TestClient  # xcore-core[ui], installed by scripts/test.sh

from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.testing import fake, plugin_host
from xcore.ui import charts
from xcore.ui.app import HERE, create_app
from xcore.ui.sample import sample_sweep


@pytest.fixture
def sweep(xcore_home):
    plugin_host({"fake": fake})
    store = open_store()
    experiment_id = sample_sweep(store, 60, curves=True)
    return experiment_id, TestClient(create_app(store, get_host()), base_url="http://127.0.0.1")


def test_uplot_is_served_and_loaded_only_where_a_chart_is_drawn(sweep):
    experiment_id, http = sweep
    assert "uPlot.iife.min.js" not in http.get("/").text  # the list draws nothing
    page = http.get(f"/experiments/{experiment_id}").text
    assert all(f"/static/{name}" in page for name in ("uPlot.iife.min.js", "uPlot.min.css", "charts.js",
                                                      "parcoords.js"))
    assert "plotly" not in page.lower()
    script = http.get("/static/uPlot.iife.min.js")
    assert script.status_code == 200 and len(script.content) < 100_000 and b"uPlot" in script.content
    assert http.get("/static/plotly.min.js").status_code == 404
    assert "MIT" in (HERE / "static" / "uPlot.LICENSE").read_text()
    bare = sample_sweep(open_store(), 2)  # no curves: its units' pages load no chart library
    assert "uPlot" not in http.get(f"/experiments/{bare}/units/1").text


def test_the_chart_endpoint_sends_columns(sweep):
    experiment_id, http = sweep
    chart = http.get(f"/api/experiments/{experiment_id}/chart").json()
    assert chart["ids"] == list(range(1, 61)) and chart["total"] == 60
    assert chart["args"] == ["lr", "batch_size", "seed"] and chart["results"] == ["loss", "accuracy"]
    assert chart["arg_values"]["seed"] == chart["ids"] and chart["status"][5] == "COMPLETED"
    assert chart["result_values"]["loss"][3] is None  # unit 4 failed: no loss
    assert set(chart["timeline"]) == {"t", "queued", "running", "completed", "failed"}


class _Row:
    def __init__(self, i: int, created: float, started: float | None, ended: float | None, status: str) -> None:
        from xcore.model.status import Status

        self.id, self.role, self.status = i, "work_unit", Status[status]
        self.created_at, self.started_at, self.ended_at = created, started, ended
        self.named_args, self.results = {"i": i}, {"loss": i / 10}


def test_a_big_sweep_is_sampled_evenly_and_its_timeline_counted_whole():
    rows = [_Row(i, 0.0, 1.0 + i, 2.0 + i if i % 2 else None, "COMPLETED" if i % 2 else "RUNNING")
            for i in range(20_000)]
    answer = charts.payload(rows, ["i"], ["loss"])  # type: ignore[arg-type]
    assert answer["total"] == 20_000 and len(answer["ids"]) == charts.MAX_TRIALS
    assert answer["ids"][:3] == [0, 4, 8] and answer["arg_values"]["i"] == answer["ids"]
    line = answer["timeline"]
    assert len(line["t"]) <= charts.MAX_TIMELINE + 2 and line["t"] == sorted(line["t"])
    assert line["queued"][0] == 20_000 and line["t"][0] == 0.0  # everything created at once
    assert line["t"][-1] >= time.time() - 60  # half of them still run: drawn on to now
    last = {name: line[name][-1] for name in ("queued", "running", "completed", "failed")}
    assert last == {"queued": 0, "running": 10_000, "completed": 10_000, "failed": 0}


def test_group_curves_are_means_and_stds_aligned_by_step():
    a = [(0, 1.0), (10, 2.0), (20, 3.0)]
    b = [(0, 3.0), (20, 5.0)]  # read at step 10 by interpolation: 4.0
    c = [(0, 5.0), (10, None)]  # a missing value is skipped; no extrapolation past step 0
    [group] = charts.group_curves({"lr=0.1": [a, b, c]})
    assert group["label"] == "lr=0.1" and group["n"] == 3 and group["steps"] == [0, 10, 20]
    assert group["mean"] == [3.0, 3.0, 4.0]
    assert group["std"][0] == pytest.approx(2.0) and group["std"][1] == pytest.approx(math.sqrt(2))
    many = charts.group_curves({"g": [[(s, float(s)) for s in range(1000)]]}, limit=50)[0]
    assert len(many["steps"]) == 50 and many["steps"][0] == 0 and many["steps"][-1] == 999
    assert many["std"] == [None] * 50  # one member: no spread


def test_grouped_curves_and_table_match_the_trials(sweep):
    experiment_id, http = sweep
    store = open_store()
    answer = http.get(f"/api/experiments/{experiment_id}/curves", params={"group_by": "lr"}).json()
    groups = {g["label"]: g for g in answer["groups"]["loss"]}
    rows = {u.id: u for u in __import__("xcore.workspace.views", fromlist=["read_units"]).read_units(
        store, experiment_id)}
    series = store.series(experiment_id)
    for label, group in groups.items():
        lr = float(label.removeprefix("lr="))
        members = [series[i]["loss"] for i in series if rows[i].named_args["lr"] == lr]
        assert group["n"] == len(members) > 1
        at = group["steps"].index(100)
        values = [dict(m)[100] for m in members]
        assert group["mean"][at] == pytest.approx(statistics.fmean(values))
        assert group["std"][at] == pytest.approx(statistics.stdev(values))
    assert len(groups) == 5
    page = http.get(f"/experiments/{experiment_id}", params={"group_by": "lr,batch_size"}).text
    table = page.split('id="groups"')[1].split("</table>")[0]
    assert table.count('<tr class="group" ') == 20
    link = re.search(r'class="group-units" href="([^"]+)"', table).group(1).replace("&amp;", "&")
    assert "where=lr%3D" in link and "batch_size%3D" in link
    assert len(re.findall(r'data-unit="\d+"', http.get(f"/experiments/{experiment_id}{link}").text)) == 3
    bad = http.get(f"/experiments/{experiment_id}", params={"group_by": "lx"}).text
    assert "Cannot group by &#39;lx&#39;" in bad


def test_a_slow_to_read_sweep_is_served_from_its_last_read_while_it_is_read_again(xcore_home, monkeypatch):
    """A 100,000-trial sweep takes seconds to read: its pages answer from the previous read
    and a thread reads it anew (the next poll sees the change); a quick read stays synchronous."""
    import xcore.ui.app as app_module

    plugin_host({"fake": fake})
    store = open_store()
    experiment_id = sample_sweep(store, 12)
    monkeypatch.setenv("XCORE_UI_CACHE_SECS", "0")
    read_units, slow = app_module.read_units, {"on": False}

    def timed_read(*args, **kwargs):
        if slow["on"]:
            time.sleep(app_module.SLOW_READ + 0.1)
        return read_units(*args, **kwargs)

    monkeypatch.setattr(app_module, "read_units", timed_read)
    http = TestClient(create_app(store, get_host()), base_url="http://127.0.0.1")
    summary = f"/api/experiments/{experiment_id}/summary"
    [job] = store.work_units(experiment_id, [4])[0].jobs  # unit 4 runs, without results
    before = http.get(summary).json()["version"]
    store.record_results(job.id, {"loss": 1.0}, final=True)
    after = http.get(summary).json()["version"]
    assert after != before  # a quick read: every request reads (XCORE_UI_CACHE_SECS=0)
    slow["on"] = True
    assert http.get(summary).json()["version"] == after  # read synchronously (the last read was quick)
    store.record_results(job.id, {"loss": 1.0, "accuracy": 0.5}, final=True)
    assert http.get(summary).json()["version"] == after  # the last read was slow: reused, then served while redone
    deadline = time.monotonic() + 30
    while http.get(summary).json()["version"] == after:
        assert time.monotonic() < deadline, "the background read never landed"
        time.sleep(0.05)


def test_the_grouped_table_shows_the_means_and_stds_of_a_groupby_of_show_json(sweep, capsys):
    """Issue 26: the dashboard's groups are ``show --group-by``'s, checked against a groupby
    of the trials ``show --json`` lists."""
    import json
    from collections import defaultdict

    from xcore.cli.main import main
    from xcore.ui.data import cell

    experiment_id, http = sweep
    capsys.readouterr()
    assert main(["show", str(experiment_id), "--json"]) == 0
    members: dict[tuple, list[dict]] = defaultdict(list)
    for unit in json.loads(capsys.readouterr().out)["work_units"]:
        members[(unit["args"]["lr"], unit["args"]["batch_size"])].append(unit)
    page = http.get(f"/experiments/{experiment_id}", params={"group_by": "lr,batch_size"}).text
    table = page.split('id="groups"')[1].split("</table>")[0]
    rows = re.findall(r'<tr class="group" [^>]*>(.*?)</tr>', table, re.S)
    assert len(rows) == len(members) == 20
    for row in rows:
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        lr, batch, count, completed, failed, loss = cells[1:7]  # after the ▸ that opens the group
        group = members[(float(lr), int(batch))]
        assert int(count) == len(group)
        assert int(completed) == sum(u["status"] == "COMPLETED" for u in group)
        assert int(failed) == sum(u["status"] == "FAILED" for u in group)
        losses = [u["results"]["loss"] for u in group if "loss" in u["results"]]
        expected = (cell(statistics.fmean(losses)) + (f" ± {cell(statistics.stdev(losses))}" if len(losses) > 1
                                                       else "")) if losses else ""
        assert loss == expected
