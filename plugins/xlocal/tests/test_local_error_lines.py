"""Why it failed, on xlocal (issue 26, item 5): a failed process's message names the exception
of its traceback (written to stderr), read through xlocal's logs hook with its results."""

from __future__ import annotations

import json
import sys

import pytest

import xcore as xm
import xlocal
from xcore.cli.main import main

pytestmark = pytest.mark.usefixtures("xcore_home")  # the isolation the core's tests get from conftest

CODE = ("import sys; print('XCORE_RESULT {\"step\": 1, \"loss\": 2.0}', flush=True); "
        "print('XCORE_RESULT {\"step\": 2, \"loss\": 1.0}', flush=True); "
        "raise RuntimeError('NaN loss') if sys.argv[1] == '--fail=1' else None")


def test_a_failed_process_names_its_exception(capsys):
    with xm.create_experiment("local failures") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", CODE])])
        for fail in (1, 0):
            experiment.add(xm.Job(exe, xlocal.Local(), args={"fail": fail}))
        experiment.wait_until_complete()
    capsys.readouterr()
    assert main(["show", str(experiment.experiment_id), "--json", "--where", "error~nan"]) == 0
    [unit] = json.loads(capsys.readouterr().out)["work_units"]
    assert unit["id"] == 1 and unit["jobs"][0]["message"] == "exit code 1; error: RuntimeError: NaN loss"
    assert unit["results"] == {"step": 2.0, "loss": 1.0}
    store = xm.get_experiment(experiment.experiment_id)._store
    assert store.series(experiment.experiment_id) == {1: {"loss": [(1.0, 2.0), (2.0, 1.0)]},
                                                      2: {"loss": [(1.0, 2.0), (2.0, 1.0)]}}
