"""``xcore show EXP --where FILTER`` (issue 26, item 4): the filter language selects what the same
filter written in Python over ``show --json`` selects; a bad filter is one line naming its token."""

from __future__ import annotations

import json
import sys

import pytest

import xcore as xm
from xcore.cli.main import main
from xcore.model.filters import MISSING, FilterError, parse
from xcore.testing import fake, plugin_host

TRIAL = ("import json, sys; a = dict(x[2:].split('=') for x in sys.argv[1:]); "
         "lr, depth, seed = float(a['lr']), int(a['depth']), int(a['seed']); "
         "sys.exit(1) if depth == 16 and seed == 1 else None; "
         "print('XCORE_RESULT', json.dumps({'loss': lr * depth / 10 + seed / 100}))")


@pytest.fixture
def sweep(xcore_home) -> int:
    plugin_host({"fake": fake})
    with xm.create_experiment("filtered sweep") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", TRIAL])])
        for lr in (0.1, 0.03, 0.01):
            for depth in (4, 8, 16):
                for seed in range(2):
                    experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"lr": lr, "depth": depth, "seed": seed,
                                                                           "opt": "adam w" if seed else "sgd"}))
    experiment.wait_until_complete()
    return experiment.experiment_id


def _show(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["show", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _ids(document: dict) -> list[int]:
    return [unit["id"] for unit in document["work_units"]]


CASES = [
    ("lr<=0.03 loss<0.05", lambda u: u["args"]["lr"] <= 0.03 and u["results"].get("loss", 1e9) < 0.05),
    ("status=failed", lambda u: u["status"] == "FAILED"),
    ("depth in (8,16) seed=0", lambda u: u["args"]["depth"] in (8, 16) and u["args"]["seed"] == 0),
    ("lr=1e-1", lambda u: u["args"]["lr"] == 0.1),
    ("lr=0.10 AND depth!=4", lambda u: u["args"]["lr"] == 0.1 and u["args"]["depth"] != 4),
    ('opt="adam w"', lambda u: u["args"]["opt"] == "adam w"),
    ("opt~ADAM", lambda u: "adam" in u["args"]["opt"]),
    ("opt~'*w'", lambda u: u["args"]["opt"].endswith("w")),
    ("loss>=0.1 status!=FAILED", lambda u: u["results"].get("loss", -1) >= 0.1 and u["status"] != "FAILED"),
    ("result.loss>0 id<=10", lambda u: u["results"].get("loss", -1) > 0 and u["id"] <= 10),
]


def test_a_filter_selects_what_python_selects_over_show_json(sweep, capsys):
    everything = _show(capsys, str(sweep))["work_units"]
    for where, python in CASES:
        expected = [u["id"] for u in everything if python(u)]
        assert expected and len(expected) < len(everything), where  # the case tells something
        assert _ids(_show(capsys, str(sweep), "--where", where)) == expected, where


def test_the_filter_works_with_group_by_sort_and_the_table(sweep, capsys):
    grouped = _show(capsys, str(sweep), "--where", "lr<=0.03", "--group-by", "lr")
    assert [g["args"]["lr"] for g in grouped["groups"]] == [0.01, 0.03] and grouped["where"] == "lr<=0.03"
    assert all(g["count"] == 6 for g in grouped["groups"])
    ranked = _show(capsys, str(sweep), "--where", "status=completed", "--where", "depth=16", "--sort=-loss")
    losses = [u["results"]["loss"] for u in ranked["work_units"]]
    assert len(losses) == 3 and losses == sorted(losses, reverse=True)
    assert main(["show", str(sweep), "--where", "depth=4 seed=0"]) == 0
    out = capsys.readouterr().out
    assert "filter   depth=4 seed=0: 3 of 18 work units" in out


BAD = [
    ("lr<=", "expected a value after 'lr<=' at the end"),
    ("lr<=0.1 loss", "expected an operator (= != < <= > >= ~ !~ or in) after 'loss' at the end"),
    ("lr<<0.1", "expected a value, not another operator at '<0.1' (character 4)"),
    ("depth in 8,16", "expected '(' after 'in'"),
    ("depth in (8,16", "expected ',' or ')' in the list at the end"),
    ('opt="adam', "unclosed \" quote at '\"adam' (character 5)"),
    ("=3", "expected a name"),
    ("lr=0.1 or depth=4", "OR is not supported"),
]


def test_a_bad_filter_is_one_line_pointing_at_its_token(sweep, capsys):
    for where, says in BAD:
        capsys.readouterr()
        assert main(["show", str(sweep), "--where", where]) == 1
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1, err
        assert f"Bad filter {where!r}" in err


def test_an_unknown_name_lists_the_names_there_are(sweep, capsys):
    capsys.readouterr()
    assert main(["show", str(sweep), "--where", "lx<0.1"]) == 1
    err = capsys.readouterr().err
    assert "unknown name 'lx': not an argument, a result or a field (arguments: depth, lr, opt, seed; " \
           "results: loss;" in err


def test_the_parser_alone():
    found = parse("  lr<=0.1   loss<5e-2 depth in ( 8 , '16' ) msg~\"a \\\"b\\\"\"  ")
    assert [(t.name, t.op, [v.text for v in t.values]) for t in found.terms] == [
        ("lr", "<=", ["0.1"]), ("loss", "<", ["5e-2"]), ("depth", "in", ["8", "16"]), ("msg", "~", ['a "b"'])]
    values = {"lr": "0.1", "loss": 0.01, "depth": 16, "msg": 'say a "b"!'}
    assert found.matches(lambda name: values.get(name, MISSING))
    assert not found.matches(lambda name: {**values, "depth": 4}.get(name, MISSING))
    assert not parse("loss<1").matches(lambda name: MISSING)  # a missing value fails a comparison
    assert parse("loss!=1").matches(lambda name: MISSING)
    assert parse("flag=true").matches(lambda name: True) and not parse("flag=1").matches(lambda name: True)
    assert parse("x>b").matches(lambda name: "c") and not parse("x>1").matches(lambda name: "c")
    assert parse("").terms == ()
    with pytest.raises(FilterError):
        parse("lr=0.1)")
