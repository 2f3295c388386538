"""``xcore show EXP --csv`` and ``--columns`` (issue 26, item 6): the (filtered, grouped) table as
CSV a spreadsheet reads back cell for cell, hostile strings included."""

from __future__ import annotations

import csv
import io
import json
import sys

import pytest

import xcore as xm
from xcore.cli.main import main
from xcore.testing import fake, plugin_host

TRIAL = ("import json, sys; a = dict(x[2:].split('=', 1) for x in sys.argv[1:]); lr = float(a['lr']); "
         "sys.exit(1) if lr > 0.5 else print('XCORE_RESULT', json.dumps({'loss': lr / 2}))")
NOTES = ['plain', 'a, "quoted"\nline', '=HYPERLINK("http://evil.invalid")', "-1", "@sum(A1)", "tab\there"]


@pytest.fixture
def sweep(xcore_home) -> int:
    plugin_host({"fake": fake})
    with xm.create_experiment("csv sweep") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", TRIAL])])
        for i, note in enumerate(NOTES):
            experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"lr": [0.1, 0.2, 0.9][i % 3], "note": note}))
    experiment.wait_until_complete()
    return experiment.experiment_id


def _csv(capsys, *args: str) -> list[list[str]]:
    capsys.readouterr()
    assert main(["show", *args, "--csv"]) == 0
    return list(csv.reader(io.StringIO(capsys.readouterr().out, newline="")))


def test_the_csv_holds_what_show_json_holds_hostile_strings_made_inert(sweep, capsys):
    assert main(["show", str(sweep), "--json"]) == 0
    units = json.loads(capsys.readouterr().out)["work_units"]
    header, *rows = _csv(capsys, str(sweep))
    assert header == ["id", "status", "exit_code", "duration", "lr", "note", "loss", "message"]
    assert len(rows) == len(units) == len(NOTES)
    for row, unit in zip(rows, units, strict=True):
        cells = dict(zip(header, row, strict=True))
        assert int(cells["id"]) == unit["id"] and cells["status"] == unit["status"]
        assert float(cells["lr"]) == unit["args"]["lr"]
        assert (float(cells["loss"]) if cells["loss"] else None) == unit["results"].get("loss")
        note = unit["args"]["note"]
        formula = note[:1] in "=+@\t" or (note[:1] == "-" and note != "-1")
        assert cells["note"] == ("'" + note if formula else note)  # a formula is text, a number stays one
        assert cells["message"] == ("exit code 1" if unit["status"] == "FAILED" else "")


def test_columns_filter_and_groups(sweep, capsys):
    assert _csv(capsys, str(sweep), "--columns", "id,lr,loss", "--where", "lr<=0.2", "--sort=-lr") == [
        ["id", "lr", "loss"], ["2", "0.2", "0.1"], ["5", "0.2", "0.1"], ["1", "0.1", "0.05"], ["4", "0.1", "0.05"]]
    grouped = _csv(capsys, str(sweep), "--group-by", "lr")
    assert grouped[0] == ["lr", "count", "completed", "failed", "loss_mean", "loss_std", "loss_min", "loss_max"]
    assert grouped[1:] == [["0.1", "2", "2", "0", "0.05", "0.0", "0.05", "0.05"],
                           ["0.2", "2", "2", "0", "0.1", "0.0", "0.1", "0.1"], ["0.9", "2", "0", "2", "", "", "", ""]]
    assert _csv(capsys, str(sweep), "--group-by", "lr", "--columns", "failed")[0] == ["lr", "failed"]
    assert main(["show", str(sweep), "--columns", "lr,status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].split() == ["6", "0.9", "FAILED"] and lines[-7].split() == ["WU", "LR", "STATUS"]


def test_an_unknown_column_is_a_clear_error(sweep, capsys):
    capsys.readouterr()
    assert main(["show", str(sweep), "--csv", "--columns", "lr,los"]) == 1
    assert "Unknown column 'los': use an argument (lr, note), a result (loss) or a field (status" in \
        capsys.readouterr().err
