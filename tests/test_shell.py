"""``xcore shell``: the backend says how to get into a running job; the command checks the job
runs, then becomes that program (its output and exit status are the command's)."""

from __future__ import annotations

import os
import sys

import pytest

import xcore as xm
from core_helpers import run_xcore_fake
from xcore.cli.main import main
from xcore.testing import fake, plugin_host


def _experiment(*executors: fake.FakeExecutor, env: dict[str, str] | None = None) -> int:
    plugin_host({"fake": fake})
    try:
        with xm.create_experiment("shell") as experiment:
            [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
            for executor in executors:
                experiment.add(xm.Job(exe, executor, env_vars=env or {}))
    except xm.ExperimentUnitError:  # a unit that failed to launch, on purpose
        pass
    return experiment.experiment_id


def test_a_command_runs_in_the_job_with_its_arguments_as_typed(xcore_home):
    experiment_id = _experiment(fake.FakeExecutor(hold=True), env={"SECRET_WORD": "swordfish; echo no"})
    code = "import os, sys; print(sys.argv[1:], os.environ['SECRET_WORD'], os.getcwd())"
    done = run_xcore_fake("shell", f"{experiment_id}/1", "--", sys.executable, "-c", code, "$HOME", "a b;c", "--x")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("['$HOME', 'a b;c', '--x'] swordfish; echo no ")
    assert done.stdout.rstrip().endswith(os.path.join("fake", "jobs")), done.stdout
    failing = run_xcore_fake("shell", f"{experiment_id}/1", "--", sys.executable, "-c", "raise SystemExit(7)")
    assert failing.returncode == 7  # the command's own status


def test_an_ended_job_or_a_wrong_target_is_a_clear_error(xcore_home, capsys):
    experiment_id = _experiment(fake.FakeExecutor(), fake.FakeExecutor(fail_launch="no quota"))
    assert main(["shell", f"{experiment_id}/1", "--", "true"]) == 1
    err = capsys.readouterr().err
    assert f"{experiment_id}/1 has ended (COMPLETED: exit code 0); a shell needs a running job" in err
    assert main(["shell", f"{experiment_id}/2"]) == 1
    assert "was never launched (failed to launch: no quota)" in capsys.readouterr().err
    assert main(["shell", f"{experiment_id}/9"]) == 1
    assert "has no work unit 9" in capsys.readouterr().err
    assert main(["shell", f"{experiment_id}"]) == 1
    assert "Name a work unit" in capsys.readouterr().err
    assert main(["shell", f"{experiment_id}/1", "--job", "nope"]) == 1
    assert "has no job 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["shell", f"{experiment_id}/1", "ls"])
    assert "Put the command after --: xcore shell EXP/WU -- CMD ARGS..." in capsys.readouterr().err


def test_a_backend_without_shells_says_so(xcore_home, capsys):
    experiment_id = _experiment(fake.FakeExecutor(hold=True))
    plugin_host({"fake": _without_shell()})
    assert main(["shell", f"{experiment_id}/1"]) == 1
    assert "Plugin 'fake' cannot open a shell in 'fake.FakeHandle' jobs" in capsys.readouterr().err


def _without_shell() -> object:
    """The fake backend's hooks, all but xcore_job_shell."""
    import types

    module = types.ModuleType("fake_without_shell")
    for name in dir(fake):
        if name.startswith("xcore_") and name != "xcore_job_shell" and callable(getattr(fake, name)):
            setattr(module, name, getattr(fake, name))
    return module
