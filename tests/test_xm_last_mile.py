"""Issue 29, the last mile of XManager compatibility: cancelled launches, ``xm.utils``,
executable names, architecture defaults and test doubles, each checked against XManager's
own definitions (read from its source; written here)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import sys
import time
from pathlib import Path

import pytest

import xcore as xm
import xlocal
from core_helpers import run_xcore
from xcore.model.status import CANCELLED_AT_LAUNCH, STOPPED_AT_LAUNCH

PY = sys.executable
TOUCH = "import sys; open(sys.argv[1], 'w').close()"


def touch_job(exe, marker: Path) -> xm.Job:
    return xm.Job(exe, xlocal.Local(), args=[str(marker)])


def shown(experiment_id: int) -> dict:
    result = run_xcore("show", str(experiment_id), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def unit_statuses(experiment_id: int) -> dict[int, str]:
    return {u["id"]: u["status"] for u in shown(experiment_id)["work_units"]}


# -- item 1: cancel() on what experiment.add returned ---------------------------------------


def test_cancelled_adds_never_run_and_the_block_ends_cleanly(tmp_path, caplog):
    kept, cancelled, generated = tmp_path / "kept", tmp_path / "cancelled", tmp_path / "generated"
    with caplog.at_level(logging.WARNING, logger="xcore"):
        with xm.create_experiment("cancel") as experiment:
            [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", TOUCH])])
            experiment.add(touch_job(exe, kept))
            plain = experiment.add(touch_job(exe, cancelled))
            assert plain.cancel() is True
            assert plain.cancelled() and plain.done() and plain.cancel() is True

            async def generator(work_unit):
                await asyncio.sleep(60)
                work_unit.add(touch_job(exe, generated))

            gen = experiment.add(generator)
            assert gen.cancel() is True
    # no ExperimentUnitError: the block ended cleanly
    assert "Ignored 2 cancelled tasks" in caplog.text or "ignored 2 cancelled tasks" in caplog.text
    experiment.wait_until_complete(timeout=60)
    time.sleep(0.3)
    assert kept.exists() and not cancelled.exists() and not generated.exists()
    record = shown(experiment.experiment_id)
    assert record["launch_status"] == "LAUNCHED"
    assert {u["id"]: u["status"] for u in record["work_units"]} == {1: "COMPLETED", 2: "CANCELLED", 3: "CANCELLED"}
    assert all(j["message"] == CANCELLED_AT_LAUNCH for u in record["work_units"][1:] for j in u["jobs"])
    waited = run_xcore("wait", str(experiment.experiment_id))
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert "2 cancelled, 1 completed" in waited.stdout
    with pytest.raises(concurrent.futures.CancelledError):
        plain.result()


def test_cancelled_adds_in_an_async_script(tmp_path):
    cancelled, generated = tmp_path / "cancelled", tmp_path / "generated"

    async def main():
        async with xm.create_experiment("cancel async") as experiment:
            [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), PY, args=["-c", TOUCH])])
            plain = experiment.add(touch_job(exe, cancelled))
            assert plain.cancel() is True

            async def generator(work_unit):
                await asyncio.sleep(60)
                await work_unit.add(touch_job(exe, generated))

            gen = experiment.add(generator)
            await asyncio.sleep(0)  # the generator has started
            assert gen.cancel() is True
            with pytest.raises(asyncio.CancelledError):
                await plain
        return experiment

    started = time.monotonic()
    experiment = asyncio.run(main())
    assert time.monotonic() - started < 30
    time.sleep(0.3)
    assert not cancelled.exists() and not generated.exists()
    assert unit_statuses(experiment.experiment_id) == {1: "CANCELLED", 2: "CANCELLED"}
    assert run_xcore("wait", str(experiment.experiment_id)).returncode == 0


def test_a_cancelled_generator_stops_what_it_started_and_wait_still_sees_failures(tmp_path):
    with xm.create_experiment("cancel started") as experiment:
        [sleeper, fails] = experiment.package([
            xm.binary(xlocal.Local.Spec(), PY, args=["-c", "import time; time.sleep(60)"]),
            xm.binary(xlocal.Local.Spec(), PY, args=["-c", "raise SystemExit(3)"]),
        ])

        async def generator(work_unit):
            await work_unit.add(xm.Job(sleeper, xlocal.Local()))
            await asyncio.sleep(60)

        launch = experiment.add(generator)
        deadline = time.monotonic() + 20
        while not launch.unit.launched_jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert launch.unit.launched_jobs
        assert launch.cancel() is True
        experiment.add(xm.Job(fails, xlocal.Local()))
    record = shown(experiment.experiment_id)
    first = record["work_units"][0]
    assert first["status"] == "CANCELLED" and first["jobs"][0]["message"] == STOPPED_AT_LAUNCH
    waited = run_xcore("wait", str(experiment.experiment_id), timeout=120)
    assert waited.returncode != 0  # unit 2 failed; the cancelled unit alone would not fail the wait
    listed = [line.split()[0] for line in waited.stdout.splitlines()[1:]]
    assert listed == ["2/python:"], waited.stdout
