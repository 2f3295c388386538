"""``xcore show EXP --group-by lr,depth`` (issue 26, item 1): a sweep with seeds read per
configuration. The grouped aggregates must be what a plain-Python groupby of ``show --json``
gives."""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict

import pytest

import xcore as xm
from xcore.cli.main import main
from xcore.testing import fake, plugin_host

TRIAL = ("import json, sys; a = dict(x[2:].split('=') for x in sys.argv[1:]); "
         "lr, depth, seed = float(a['lr']), int(a['depth']), int(a['seed']); "
         "sys.exit(1) if depth == 4 and seed == 2 else None; "
         "print('XCORE_RESULT', json.dumps({'loss': lr * depth + seed / 7, 'acc': 1 - lr * seed}))")


@pytest.fixture
def sweep(xcore_home) -> int:
    plugin_host({"fake": fake})
    with xm.create_experiment("seeded sweep") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", TRIAL])])
        for lr in (0.1, 0.01):
            for depth in (2, 4):
                for seed in range(3):
                    experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"lr": lr, "depth": depth, "seed": seed}))
    experiment.wait_until_complete()
    return experiment.experiment_id


def _json(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["show", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_grouped_aggregates_match_a_groupby_of_show_json(sweep, capsys):
    units = _json(capsys, str(sweep))["work_units"]
    expected: dict[tuple, list[dict]] = defaultdict(list)
    for unit in units:
        expected[(unit["args"]["lr"], unit["args"]["depth"])].append(unit)
    grouped = _json(capsys, str(sweep), "--group-by", "lr,depth")
    assert grouped["group_by"] == ["lr", "depth"] and len(grouped["groups"]) == len(expected) == 4
    for group in grouped["groups"]:
        members = expected[(group["args"]["lr"], group["args"]["depth"])]
        assert group["count"] == len(members) == 3
        assert group["completed"] == sum(u["status"] == "COMPLETED" for u in members)
        assert group["failed"] == sum(u["status"] == "FAILED" for u in members)
        for name in ("loss", "acc"):
            values = [u["results"][name] for u in members if name in u["results"]]
            stats = group["results"][name]
            assert stats["n"] == len(values)
            assert stats["mean"] == pytest.approx(statistics.fmean(values))
            assert stats["std"] == pytest.approx(statistics.stdev(values))
            assert (stats["min"], stats["max"]) == (min(values), max(values))
    assert {g["failed"] for g in grouped["groups"]} == {0, 1}  # depth 4 lost seed 2


def test_groups_sort_by_a_results_mean_and_print_as_a_table(sweep, capsys):
    groups = _json(capsys, str(sweep), "--group-by", "lr,depth", "--sort", "-loss")["groups"]
    means = [g["results"]["loss"]["mean"] for g in groups]
    assert means == sorted(means, reverse=True)
    assert main(["show", str(sweep), "--group-by", "depth", "--sort", "loss"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("DEPTH"))
    assert header.split()[:4] == ["DEPTH", "COUNT", "COMPLETED", "FAILED"] and "LOSS MEAN" in header
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [("2", "6", "6", "0"), ("4", "6", "4", "2")]


def test_an_unknown_name_is_a_clear_error(sweep, capsys):
    capsys.readouterr()
    assert main(["show", str(sweep), "--group-by", "lr,width"]) == 1
    assert "Cannot group by 'width': not an argument of these work units (arguments: depth, lr, seed)" in \
        capsys.readouterr().err
    assert main(["show", str(sweep), "--group-by", "lr", "--sort", "los"]) == 1
    assert "Cannot sort groups by 'los'" in capsys.readouterr().err
