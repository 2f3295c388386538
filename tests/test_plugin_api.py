"""The typed plugin contract: handles, per-request launch failures, routing, API versions."""

from __future__ import annotations

import importlib
import warnings

import attrs
import pluggy
import pytest

import xcore as xm
from xcore import plugin as xp
from xcore.hooks.host import PLUGIN_API_VERSION, PluginHost
from xcore.testing import InMemoryStore, fake, make_launch_context, make_packaging_context, make_request, plugin_host


def test_job_handle_declares_what_the_core_reads():
    fields = {f.name: f for f in attrs.fields(xp.JobHandle)}
    assert set(fields) == {"log_path", "error"}
    assert all(f.kw_only and f.default is None for f in fields.values())

    @attrs.define
    class Positional(xp.JobHandle):  # positional fields after the inherited keyword-only ones
        job_id: str
        log_path: str

    handle = Positional("7", "/tmp/x.log")
    assert (handle.job_id, handle.log_path, handle.error) == ("7", "/tmp/x.log", None)


def test_a_launch_failure_fails_only_its_job_with_the_reason(xcore_home):
    plugin_host({"fake": fake})
    with pytest.raises(xm.ExperimentUnitError, match="failed to launch: quota exceeded"):
        with xm.create_experiment("partial") as experiment:
            [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
            experiment.add(xm.Job(exe, fake.FakeExecutor()))
            experiment.add(xm.Job(exe, fake.FakeExecutor(fail_launch="quota exceeded")))
            experiment.add(xm.Job(exe, fake.FakeExecutor()))
    units = xm.get_experiment(experiment.experiment_id).work_units
    statuses = [units[i].get_status() for i in (1, 2, 3)]
    assert [s.status for s in statuses] == [xm.Status.COMPLETED, xm.Status.FAILED, xm.Status.COMPLETED]
    assert statuses[1].message.endswith("failed to launch: quota exceeded")
    assert fake.LAUNCH_BATCHES[-1] == 3  # one batch: the failure did not split the submission


def _plugin(**members):
    """A plugin object (hashable, as pluggy needs) with these members."""
    return type("Plugin", (), {k: staticmethod(v) if callable(v) else v for k, v in members.items()})()


def _fake_with(**hooks):
    """The fake backend's hooks with some replaced, as one plugin object."""
    names = ("xcore_register_kinds", "xcore_package", "xcore_launch", "xcore_job_states", "xcore_cancel",
             "xcore_job_logs")
    return _plugin(**{**{n: getattr(fake, n) for n in names}, **hooks})


def test_a_handle_with_an_error_is_recorded_failed_to_launch(xcore_home):
    @xp.hookimpl
    def old_style_launch(executor_kind, requests, context):  # before LaunchFailure: a handle with error
        handles = fake.xcore_launch(executor_kind, requests, context)
        return [attrs.evolve(handles[0], error="no such image")] + handles[1:]

    plugin_host({"fake": _fake_with(xcore_launch=old_style_launch)})
    with xm.create_experiment("old style") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor()))
        experiment.add(xm.Job(exe, fake.FakeExecutor()))
    units = xm.get_experiment(experiment.experiment_id).work_units
    assert units[1].get_status().status is xm.Status.FAILED
    assert units[1].get_status().message.endswith("failed to launch: no such image")
    assert units[2].get_status().status is xm.Status.COMPLETED


def test_launch_rejects_a_result_that_is_neither_handle_nor_failure(xcore_home):
    launch = xp.hookimpl(lambda executor_kind, requests, context: ["oops"])
    host = plugin_host({"fake": _fake_with(xcore_launch=launch)})
    request = make_request(fake.FakeExecutable(name="x", command=["true"]), fake.FakeExecutor())
    with pytest.raises(xp.LaunchError, match="return a JobHandle or a LaunchFailure"):
        host.launch("fake.FakeExecutor", [request], make_launch_context(xcore_home / "s"))


class _Greedy:
    """Packages anything: before routing, it answered for every plugin's executor specs."""

    calls = 0

    @xp.hookimpl(tryfirst=True)
    def xcore_package(self, packageable, context):
        _Greedy.calls += 1
        return fake.FakeExecutable(name="greedy", command=["false"])


def test_packaging_reaches_only_the_owner_of_the_executor_spec(tmp_path):
    host = plugin_host({"fake": fake, "greedy": _Greedy()})
    packageable = xm.binary(fake.FakeSpec(), "true", args=["--x=1"], env_vars={"A": "b"})
    executable = host.package(packageable, make_packaging_context(tmp_path))
    assert _Greedy.calls == 0
    assert executable.command == ["true"]
    # the core attaches the packageable's args and env; the fake copied none of them
    assert executable.args.to_list() == ["--x=1"] and executable.env_vars == {"A": "b"}


def test_a_plugin_for_another_api_major_is_refused_with_a_clear_error():
    host = PluginHost(load_entry_points=False)
    future = _plugin(XCORE_PLUGIN_API="2.0", xcore_register_kinds=fake.xcore_register_kinds)
    host.register(future, "future", distribution="xcore-future", version="3.1")
    info = host.infos["future"]
    assert info.status == "failed"
    assert "written for xcore plugin API 2.0" in info.error and PLUGIN_API_VERSION in info.error
    assert "xcore-future 3.1" in info.error
    newer_minor = _plugin(XCORE_PLUGIN_API="1.99")
    host.register(newer_minor, "newer")
    assert host.infos["newer"].status == "failed"
    garbage = _plugin(XCORE_PLUGIN_API="one")
    host.register(garbage, "garbage")
    assert "not a version like" in host.infos["garbage"].error
    host.register(_plugin(XCORE_PLUGIN_API="1.0"), "ok")
    assert host.infos["ok"].status == "loaded"
    assert any("written for xcore plugin API 2.0" in w for w in host.failure_warnings())


def test_deprecated_hooks_warn_through_pluggy_warn_on_impl():
    hookspec = pluggy.HookspecMarker("xcore")
    warning = xp.XcorePluginDeprecationWarning("xcore_old is deprecated; implement xcore_new instead")

    class Specs:
        @hookspec(warn_on_impl=warning)
        def xcore_old(self):
            """Old hook."""

    pm = pluggy.PluginManager("xcore")
    pm.add_hookspecs(Specs)
    plugin = _plugin(xcore_old=xp.hookimpl(lambda: None))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pm.register(plugin)
    assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)] == [str(warning)]


def test_the_plugin_api_exports_resolve():
    for name in xp.__all__:
        assert getattr(xp, name) is not None, name
    assert xp.KindRegistrar is importlib.import_module("xcore.hooks.kinds").KindRegistrar  # re-exported, not copied
    assert xp.PLUGIN_API_VERSION == "1.1"


def test_in_memory_store_behaves_like_the_store():
    store = InMemoryStore()
    experiment = store.create_experiment("t", tags=["a"])
    from xcore.store.records import NewJob

    [job_id] = store.add_work_unit(experiment.id, 1, "work_unit", {"lr": 1}, "", [NewJob("job", "k", {}, {}, [], {})])
    store.mark_launched([(job_id, "fake.FakeHandle", {"record": "x"}, "/log")])
    store.mark_launched([(job_id, "fake.FakeHandle", {"record": "x"}, "/log")])  # twice: one PENDING event
    assert store.get_experiment(experiment.id).status_counts == {"PENDING": 1}
    store.record_states([(job_id, xp.JobState(xp.Status.COMPLETED, "exit code 0", 0))])
    store.record_states([(job_id, xp.JobState(xp.Status.RUNNING))])  # finished stays finished
    [unit] = store.work_units(experiment.id)
    assert unit.jobs[0].status is xp.Status.COMPLETED and unit.jobs[0].log_path == "/log"
    assert [e.status for e in store.job_history(job_id)] == [xp.Status.LAUNCHING, xp.Status.PENDING,
                                                              xp.Status.COMPLETED]
    assert store.active_jobs([experiment.id]) == []
    assert [e.title for e in store.list_experiments(tag="a")] == ["t"]
    store.create_experiment("theirs", user="bob")
    assert [e.title for e in store.list_experiments(user="bob")] == ["theirs"]  # `xcore list --user bob`
    with pytest.raises(xp.XcoreError):
        store.get_experiment(99)


def test_the_experiment_api_runs_on_the_in_memory_store(monkeypatch):
    from xcore.testing import MemoryStorePlugin

    store = InMemoryStore()
    plugin_host({"fake": fake, "memory": MemoryStorePlugin(store)})
    monkeypatch.setenv("XCORE_STORE", "memory:")
    with xm.create_experiment("in memory") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor()))
    experiment.wait_until_complete()
    assert store.work_units(experiment.experiment_id)[0].jobs[0].status is xp.Status.COMPLETED


def test_builders_make_what_hooks_receive(tmp_path):
    request = make_request(fake.FakeExecutable(name="x", command=["true"]), fake.FakeExecutor(), ["a", 1],
                           {"K": "v"}, job_id=5)
    assert (request.args, request.env, request.full_name) == (["a", "1"], {"K": "v"}, "1_5_job")
    context = make_launch_context(tmp_path / "state")
    [handle] = fake.xcore_launch("fake.FakeExecutor", [request], context)
    assert fake.received(handle) == (["a", "1"], {"K": "v"})
    assert fake.xcore_job_states("fake.FakeHandle", [handle])[0].status is xp.Status.COMPLETED


def test_a_variable_the_plugin_derived_from_the_users_is_kept(tmp_path):
    @xp.hookimpl
    def package(packageable, context):  # like xlocal: the project goes in front of the user's PYTHONPATH
        return fake.FakeExecutable(name="m", command=["true"],
                                   env_vars={"PYTHONPATH": "/project:" + packageable.env_vars["PYTHONPATH"]})

    host = plugin_host({"fake": _fake_with(xcore_package=package)})
    packageable = xm.binary(fake.FakeSpec(), "true", env_vars={"PYTHONPATH": "/mine", "OTHER": "1"})
    executable = host.package(packageable, make_packaging_context(tmp_path))
    assert executable.env_vars == {"PYTHONPATH": "/project:/mine", "OTHER": "1"}


def test_in_memory_store_replaces_jobs_that_never_reached_a_backend():
    from xcore.store.records import NewJob

    store = InMemoryStore()
    experiment = store.create_experiment("t")
    new = [NewJob("a", "k", {}, {}, [], {}), NewJob("b", "k", {}, {}, [], {})]
    launched, never = store.add_work_unit(experiment.id, 1, "work_unit", {}, "", new, lease_id=None)
    store.mark_launched([(launched, "fake.FakeHandle", {}, None)], intent_id=None)
    store.record_states([(launched, xp.JobState(xp.Status.FAILED, "exit code 1", 1)),
                         (never, xp.JobState(xp.Status.FAILED, "launch failed"))], intent_id=None)
    [again] = store.add_jobs(experiment.id, 1, new[1:], replace_unlaunched=True)
    [unit] = store.work_units(experiment.id)
    assert [j.id for j in unit.jobs] == [launched, again] and again not in (launched, never)
    assert store.job_history(never) == [] and [e.status for e in store.job_history(again)] == [xp.Status.LAUNCHING]


def test_the_datamodel_decorators_are_deprecated_for_plugins():
    """The core's attrs fast path is not part of the plugin API any more: plugins use attrs."""
    import subprocess
    import sys

    code = ("import warnings; warnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    from xcore.plugin import define\n"
            "print([type(w.message).__name__ for w in caught], caught[0].message if caught else '')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.startswith("['XcorePluginDeprecationWarning']") and "attrs.define" in out, out
