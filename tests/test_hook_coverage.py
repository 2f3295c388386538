"""Every hook runs in a real flow (datasette's habit, without grepping the source): the hook
calls of a launch, status, logs, cancel and CLI round on the fake backend are recorded with
pluggy's call monitoring, and every hookspec must have been called and answered. A launcher
killed after the fake backend accepted its batch covers ``xcore_adopt``: the next command
adopts the job it submitted."""

from __future__ import annotations

import inspect
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import xcore as xm
from xcore.cli.main import build_parser, main
from xcore.hooks import specs as hookspecs
from xcore.hooks.host import get_host
from xcore.launch.registry import open_store
from xcore.runtime.tracking import cancel_jobs, wait_for
from xcore.testing import fake, plugin_host

KILLED_LAUNCHER = textwrap.dedent("""
    import sys
    import xcore as xm
    from xcore.testing import fake, plugin_host
    plugin_host({"fake": fake})
    with xm.create_experiment("killed launcher") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True, pause_after_launch=sys.argv[1])))
""")

HOOKS = {name for name, fn in vars(hookspecs).items() if name.startswith("xcore_") and inspect.isfunction(fn)}


def _kill_a_launcher_mid_launch(tmp_path) -> None:
    """Run a launcher in a process, SIGKILL it once the fake backend has its job, unrecorded."""
    script, submitted = tmp_path / "launch.py", tmp_path / "submitted"
    script.write_text(KILLED_LAUNCHER)
    launcher = subprocess.Popen([sys.executable, str(script), str(submitted)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not submitted.exists():
        assert launcher.poll() is None, launcher.communicate()[1].decode()
        assert time.monotonic() < deadline, "the launcher never reached the backend"
        time.sleep(0.05)
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()


def test_every_hook_is_called_in_a_real_flow(xcore_home, tmp_path, capsys):
    _kill_a_launcher_mid_launch(tmp_path)
    host = plugin_host({"fake": fake})
    called: dict[str, set[str]] = {}

    def before(hook_name, hook_impls, kwargs):
        called.setdefault(hook_name, set()).update(impl.plugin_name for impl in hook_impls)

    from xcore.paths import config_dir, private_dir

    private_dir(config_dir())  # a plugin's sink type: the duty of the status changes below builds it
    (config_dir() / "config.toml").write_text('[[notifications.sinks]]\nname = "f"\ntype = "fake"\n')
    undo = host.pm.add_hookcall_monitoring(before, lambda *args: None)
    try:
        host._kinds = None  # registration runs again, under monitoring
        with xm.create_experiment("coverage") as experiment:
            [exe] = experiment.package([xm.binary(fake.FakeSpec(), "echo", args=["hi ✓"])])
            experiment.add(xm.Job(exe, fake.FakeExecutor()))
            experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
        units = experiment.work_units
        assert units[1].wait_until_complete is not None
        store = open_store()
        jobs = [job for unit in store.work_units(experiment.experiment_id) for job in unit.jobs]
        handle = get_host().serializer.load(jobs[0].handle)
        assert "".join(get_host().job_logs(jobs[0].handle_kind, handle, True)) == "hi ✓\n"
        shell = get_host().job_shell(jobs[1].handle_kind, get_host().serializer.load(jobs[1].handle), ["true"])
        assert shell.argv == ("true",)
        assert get_host().job_env(jobs[0].handle_kind, handle) == {}
        with pytest.raises(TimeoutError):  # the held job: the wait blocks in the backend between polls
            wait_for(lambda: jobs[1:], store, get_host(), timeout=0.05)
        assert cancel_jobs(store, get_host(), jobs[1:]) == 1
        assert units[2].get_status().status is xm.Status.CANCELLED
        assert units[1].get_status().status is xm.Status.COMPLETED
        args = build_parser().parse_args(["fake-jobs"])
        assert args.func(args) == 0 and ".json" in capsys.readouterr().out
        assert main(["list"]) == 0  # resolves the killed launcher's lease: adopts its submitted job
        assert "1 jobs adopted, 0 marked failed to launch" in capsys.readouterr().err
        assert main(["show", str(experiment.experiment_id)]) == 0  # reads the ended jobs' results
        [killed] = [job for unit in store.work_units(experiment.experiment_id - 1) for job in unit.jobs]
        assert killed.handle is not None and killed.status is not xm.Status.LAUNCHING
    finally:
        undo()
    # the host calls each xcore_register_kinds implementation itself (to scope its registrar),
    # which pluggy's monitoring does not see: the registered kinds are the evidence
    if any(entry.plugin == "fake" for entry in host.kinds):
        called.setdefault("xcore_register_kinds", set()).add("fake")
    assert set(called) >= HOOKS, f"hooks never called: {sorted(HOOKS - set(called))}"
    for hook in HOOKS - {"xcore_open_store"}:
        assert "fake" in called[hook], f"{hook} did not reach the fake backend"
