"""``xcore.contrib.tensorboard``: XManager's TensorBoard auxiliary unit. The command it builds
runs here against a stand-in ``tensorboard`` package (so the args and the timeout are checked
without TensorBoard installed); plugins/xlocal/tests/test_contrib_tensorboard_local.py serves the
real TensorBoard on xlocal."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from unittest import mock

import pytest

import xcore as xm
from xcore.contrib import tensorboard
from xcore.errors import PackagingError
from xcore.hooks.host import get_host
from xcore.model.status import Status
from xcore.testing import fake, plugin_host

FLAGS = ["--logdir=/runs/7", "--port=6006", "--host=0.0.0.0", "--load_fast=false"]


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``tensorboard.main`` that writes its argv to a file and then serves forever."""
    package = tmp_path / "stand_in" / "tensorboard"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    seen = tmp_path / "argv.json"
    (package / "main.py").write_text(textwrap.dedent(f"""\
        import json, sys, time
        if __name__ == "__main__":
            open({str(seen)!r}, "w").write(json.dumps(sys.argv[1:]))
            time.sleep(600)
    """))
    monkeypatch.setenv("PYTHONPATH", str(package.parent))
    return seen


def _tensorboard_unit(experiment: xm.Experiment) -> xm.ExperimentUnit:
    [unit] = [u for u in experiment._units.values() if isinstance(u.role, xm.AuxiliaryUnitRole)]
    return unit


def test_the_job_args_are_xmanagers():
    provider = tensorboard.TensorboardProvider
    assert provider.get_tensorboard_job_args("logs") == {
        "logdir": "logs", "port": 6006, "host": "0.0.0.0", "load_fast": "false"}
    assert provider.get_tensorboard_job_args("logs", 2002, {"logdir": "v2", "new": 0}) == {
        "logdir": "v2", "port": 2002, "host": "0.0.0.0", "load_fast": "false", "new": 0}


def test_a_negative_timeout_is_refused_before_anything_is_added():
    experiment = mock.Mock()
    with pytest.raises(RuntimeError, match="nonnegative"):
        tensorboard.add_tensorboard(experiment, "logs", fake.FakeExecutor(), timeout_secs=-5)
    experiment.package.assert_not_called()
    experiment.add.assert_not_called()


def test_it_is_an_auxiliary_unit_with_tensorboards_args_that_never_counts_toward_the_status():
    plugin_host({"fake": fake})
    with xm.create_experiment("tb") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"lr": 0.1}))
        tensorboard.add_tensorboard(experiment, "/runs/7", fake.FakeExecutor(hold=True), timeout_secs=60,
                                    args={"reload_interval": 5})
    unit = _tensorboard_unit(experiment)
    assert unit.role == xm.AuxiliaryUnitRole(termination_delay_secs=0)
    [job] = [j for j in experiment._all_jobs(include_auxiliary=True) if j.work_unit_id == unit.work_unit_id]
    assert job.name == "tensorboard"
    record = json.loads(Path(get_host().serializer.load(job.handle).record).read_text())
    program = tensorboard.TensorboardProvider.get_tensorboard_command(60)
    assert record["argv"] == [*program[1:], *FLAGS, "--reload_interval=5"]  # python3 is the executable
    assert job.executable["command"] == [program[0]]

    # The work unit completed; TensorBoard still runs, then fails: the experiment reads COMPLETED throughout.
    # (get_status asks the backend first; the store keeps what it last heard)
    assert experiment.get_status().status is Status.COMPLETED
    assert experiment._store.get_experiment(experiment.experiment_id).status is Status.COMPLETED
    fake.set_state(get_host().serializer.load(job.handle), Status.FAILED, "exit code 1", 1)
    assert experiment.get_status().status is Status.COMPLETED
    assert unit.get_status().status is Status.FAILED
    assert experiment._store.get_experiment(experiment.experiment_id).status is Status.COMPLETED


def test_the_command_serves_tensorboard_with_the_flags_until_the_timeout(stand_in):
    command = tensorboard.TensorboardProvider.get_tensorboard_command(1, python=sys.executable)
    started = time.monotonic()
    done = subprocess.run([*command, *FLAGS], timeout=60, check=False)
    assert done.returncode == 0 and time.monotonic() - started < 30  # ended by its timeout, cleanly
    assert json.loads(stand_in.read_text()) == FLAGS


def test_timeout_zero_serves_until_stopped(stand_in):
    command = tensorboard.TensorboardProvider.get_tensorboard_command(0, python=sys.executable)
    server = subprocess.Popen([*command, *FLAGS])
    try:
        deadline = time.monotonic() + 30
        while not stand_in.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)
        assert server.poll() is None
    finally:
        server.kill()
        server.wait()


def test_it_runs_on_the_fake_backend(stand_in):
    plugin_host({"fake": fake})
    with xm.create_experiment("tb") as experiment:  # the fake runs the job while it is launched
        tensorboard.add_tensorboard(experiment, "/runs/7", fake.FakeExecutor(), timeout_secs=1,
                                    python=sys.executable)
    status = _tensorboard_unit(experiment).get_status()
    assert status.status is Status.COMPLETED, status.message  # the timeout ended it, cleanly
    assert json.loads(stand_in.read_text()) == FLAGS


def test_a_backend_that_runs_only_images_gets_the_command_in_tensorflows_image():
    def package(packageables):
        [packageable] = packageables
        if isinstance(packageable.executable_spec, xm.Binary):
            raise PackagingError("cannot run Binary; use xm.container(IMAGE)")
        return ["the image"]

    experiment = mock.Mock()
    experiment.package.side_effect = package
    tensorboard.add_tensorboard(experiment, "gs://b/logs", fake.FakeExecutor(), timeout_secs=5)
    [packageable] = experiment.package.call_args[0][0]
    assert packageable.executable_spec == xm.Container("tensorflow/tensorflow")
    assert packageable.args.to_list(str) == tensorboard.TensorboardProvider.get_tensorboard_command(5)
    [aux] = experiment.add.call_args[0]
    assert isinstance(aux, xm.AuxiliaryUnitJob) and aux.termination_delay_secs == 0
    assert aux.job.executable == "the image" and aux.job.name == "tensorboard"
    assert aux.job.args.to_dict()["logdir"] == "gs://b/logs"


def test_a_backend_that_takes_neither_says_both_reasons():
    experiment = mock.Mock()
    experiment.package.side_effect = PackagingError("no")
    with pytest.raises(PackagingError, match="neither a command nor an image: Binary: no; Container: no"):
        tensorboard.add_tensorboard(experiment, "logs", fake.FakeExecutor())
    experiment.add.assert_not_called()
