"""XManager's experiment, work-unit and job-generator semantics, with real local processes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import time

import pytest
from xlocal_helpers import run_xcore, write_script

import xcore as xm
import xlocal
from xcore.model.status import Status

pytestmark = pytest.mark.usefixtures("xcore_home")  # the isolation the core's tests get from conftest

PY = sys.executable


def python_job(code: str):
    return xm.binary(xlocal.Local.Spec(), PY, args=["-c", code])


def test_job_generators_run_on_the_scripts_own_event_loop():
    seen = {}

    async def main():
        async with xm.create_experiment("loop") as experiment:
            [exe] = experiment.package([python_job("pass")])

            async def generator(work_unit, tag):
                seen["loop"] = asyncio.get_running_loop()
                seen["xid"] = xm.core.get_xid_from_context()
                seen["tag"] = tag
                await work_unit.add(xm.Job(exe, xlocal.Local()))

            seen["main"] = asyncio.get_running_loop()
            unit = await experiment.add(generator, args={"tag": "t"})
            await unit.wait_until_complete()
            seen["expected_xid"] = experiment.experiment_id

    asyncio.run(main())
    assert seen["loop"] is seen["main"] and seen["tag"] == "t"
    assert seen["xid"] == seen["expected_xid"]


def test_a_sync_with_inside_a_coroutine_is_refused():
    async def main():
        experiment = xm.create_experiment("wrong with")
        with pytest.raises(RuntimeError, match="async with"), experiment:
            pass

    asyncio.run(main())


def test_the_experiment_is_the_context_inside_its_with_block():
    assert xm.core.get_xid_from_context() == -1
    with xm.create_experiment("ctx") as experiment:
        assert xm.core.get_xid_from_context() == experiment.experiment_id
    assert xm.core.get_xid_from_context() == -1


def test_cancelling_a_generator_launch_stops_it_and_its_jobs():
    started = time.monotonic()
    with xm.create_experiment("cancel") as experiment:
        [sleeper] = experiment.package([python_job("import time; time.sleep(60)")])

        async def slow(work_unit):
            work_unit.add(xm.Job(sleeper, xlocal.Local()))
            await asyncio.sleep(60)  # still "launching" when cancelled
            work_unit.add(xm.Job(sleeper, xlocal.Local()))

        launch = experiment.add(slow)
        deadline = time.monotonic() + 20
        while not launch.unit._jobs() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert launch.cancel() is True
        assert launch.cancelled() and launch.done()
        with pytest.raises(concurrent.futures.CancelledError):
            launch.result()
    assert time.monotonic() - started < 30  # the 60 s sleep was not awaited
    jobs = launch.unit._jobs()
    assert len(jobs) == 1  # the second add never happened
    status = launch.unit.get_status()
    assert not status.is_active, status


def test_cancel_after_the_launch_finished_returns_false():
    with xm.create_experiment("late cancel") as experiment:
        [exe] = experiment.package([python_job("pass")])
        launch = experiment.add(xm.Job(exe, xlocal.Local()))
        launch.result()
        assert launch.cancel() is False and not launch.cancelled()


def test_debug_interrupt_stops_only_that_unit():
    with xm.create_experiment("debug") as experiment:
        [exe, sleeper] = experiment.package([python_job("pass"), python_job("import time; time.sleep(60)")])

        async def interrupted(work_unit):
            await work_unit.add(xm.Job(sleeper, xlocal.Local()))
            raise xm.DebugInterrupt()

        experiment.add(interrupted)
        experiment.add(xm.Job(exe, xlocal.Local()))
    experiment.wait_until_complete(timeout=60)
    statuses = {i: u.get_status() for i, u in experiment.work_units.items()}
    assert statuses[1].is_active is False and "CANCEL" in str(_status(experiment, 1)).upper()
    assert statuses[2].is_completed


def _status(experiment, unit_id):
    return next(j.status for j in experiment.work_units[unit_id]._jobs())


def test_full_job_names_and_launched_jobs():
    with xm.create_experiment("names") as experiment:
        [exe] = experiment.package([python_job("print('hi')")])

        async def generator(work_unit):
            group = xm.JobGroup()  # empty, filled before it is added
            group.jobs["server"] = xm.Job(exe, xlocal.Local(), args={"peer": work_unit.get_full_job_name("redis")})
            group.jobs["redis"] = xm.Job(exe, xlocal.Local(), name="redis")
            await work_unit.add(group)

        unit = experiment.add(generator).result()
    experiment.wait_until_complete(timeout=60)
    xid = experiment.experiment_id
    assert unit.get_full_job_name("redis") == f"{xid}_1_redis"
    server = next(j for j in unit._jobs() if j.name == "server")
    assert server.args[-1] == f"--peer={xid}_1_redis"
    launched = unit.launched_jobs
    assert sorted(j.name for j in launched) == ["redis", "server"]
    assert all(isinstance(j, xm.LaunchedJob) and j.logs for j in launched)


def test_stream_output_copies_job_output_to_the_launcher(tmp_path):
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("stream") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "print('line one'); print('line two')"])])
    e.add(xm.Job(exe, xlocal.Local(xm.JobRequirements(cpu=1), experimental_stream_output=True), name="talker"))
    e.wait_until_complete()
    import time; time.sleep(0.6)  # one more poll of the follower
""")
    result = run_xcore("launch", str(script))
    assert result.returncode == 0, result.stderr
    assert "[1/talker] line one\n[1/talker] line two\n" in result.stdout


def test_job_status_does_not_depend_on_stream_output():
    with xm.create_experiment("quiet") as experiment:
        [exe] = experiment.package([python_job("print('x')")])
        experiment.add(xm.Job(exe, xlocal.Local()))
    jobs = experiment.wait_until_complete(timeout=60)
    assert [j.status for j in jobs] == [Status.COMPLETED]


def test_unit_identity_and_job_level_identity_are_accepted():
    with xm.create_experiment("identity") as experiment:
        [exe] = experiment.package([python_job("pass")])

        async def generator(work_unit):
            await work_unit.add(xm.Job(exe, xlocal.Local()), identity="job-a")

        first = experiment.add(generator, identity="unit-a").result()
        again = experiment.add(generator, identity="unit-a").result()
    assert first is again and first.identity == "unit-a"
    assert xm.get_experiment(experiment.experiment_id).work_units[1].identity == "unit-a"
