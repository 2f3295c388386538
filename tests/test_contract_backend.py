"""Backends as objects (plugin API 1.1): the host calls the one ``Backend`` that declared a job's
kind, without kind arguments; the contract suite passes through that path end to end (in
fresh processes too); 1.0 plugins with module-level hooks work beside it."""

from __future__ import annotations

import os
import textwrap

import attrs
import pytest

import xcore as xm
from xcore import plugin as xp
from xcore.errors import PluginLoadError
from xcore.hooks.host import PluginHost
from xcore.testing import fake, make_launch_context, make_packaging_context, make_request, plugin_host
from xcore.testing.contract import ContractSuite, ContractTarget

# The fake backend's behaviour (xcore.testing.fake, a 1.0 plugin) in the class form, as an
# installed plugin module would write it; registered under the same name, so its kinds are
# "fake.FakeExecutor", ... Every method drops the kind its hook would get.
BACKEND_PLUGIN = textwrap.dedent('''
    from xcore import plugin as xp
    from xcore.testing import fake

    XCORE_PLUGIN_API = "1.1"


    class FakeBackend(xp.Backend):
        kinds = (fake.FakeExecutor, fake.FakeSpec, fake.FakeExecutable, fake.FakeHandle)

        def package(self, packageable, context):
            return fake.xcore_package(packageable, context)

        def launch(self, requests, context):
            return fake.xcore_launch("unused", requests, context)

        def adopt(self, requests, context):
            return fake.xcore_adopt("unused", requests, context)

        def states(self, handles):
            return fake.xcore_job_states("unused", handles)

        def wait_for_change(self, handles, timeout):
            return fake.xcore_wait_for_change("unused", handles, timeout)

        def cancel(self, handles):
            fake.xcore_cancel("unused", handles)

        def logs(self, handle, follow):
            return fake.xcore_job_logs("unused", handle, follow)


    @xp.hookimpl
    def xcore_register_kinds(registry):
        registry.add_backend(FakeBackend())
''')


@pytest.fixture
def backend_module(tmp_path, monkeypatch):
    """``fake_backend_plugin``, importable here and in the suite's fresh processes."""
    site = tmp_path / "backend-site"
    site.mkdir()
    (site / "fake_backend_plugin.py").write_text(BACKEND_PLUGIN)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return "fake_backend_plugin"


@pytest.fixture
def xcore_contract_target(backend_module):
    return ContractTarget(executor_spec=fake.FakeSpec(), executor=fake.FakeExecutor,
                          held_executor=lambda: fake.FakeExecutor(hold=True), forget=fake.forget,
                          plugins={"fake": backend_module}, timeout_secs=30)


class TestFakeAsABackendObject(ContractSuite):
    def test_the_suite_reaches_the_backend_object(self, contract_home):
        from xcore.hooks.host import get_host

        assert type(get_host().kinds.entry("fake.FakeHandle").backend).__name__ == "FakeBackend"


# -- two backends in one plugin, dispatched by kind ------------------------------------------


@attrs.frozen
class DuoSpec(xp.ExecutorSpec):
    pass


@attrs.define(kw_only=True)
class Duo(xp.Executor):
    box: bool = False  # True: the job's handle is a BoxHandle, served by the second backend


@attrs.define(kw_only=True)
class DuoExecutable(xp.Executable):
    pass


@attrs.define
class RunHandle(xp.JobHandle):
    job: str


@attrs.define
class BoxHandle(xp.JobHandle):
    job: str


CALLS: list[tuple[str, str, tuple]] = []


class Runs(xp.Backend):
    kinds = (Duo, DuoSpec, DuoExecutable, RunHandle)

    def package(self, packageable, context):
        CALLS.append(("runs", "package", ()))
        return DuoExecutable(name="duo")

    def launch(self, requests, context):
        CALLS.append(("runs", "launch", (len(requests),)))
        return [(BoxHandle if r.executor.box else RunHandle)(r.full_name) for r in requests]

    def states(self, handles):
        CALLS.append(("runs", "states", tuple(h.job for h in handles)))
        return [xp.JobState(xp.Status.RUNNING) for _ in handles]

    def cancel(self, handles):
        CALLS.append(("runs", "cancel", tuple(h.job for h in handles)))

    def logs(self, handle, follow):
        CALLS.append(("runs", "logs", (handle.job,)))
        return iter(["run output\n"])


class Boxes(xp.Backend):
    kinds = (BoxHandle,)

    def states(self, handles):
        CALLS.append(("boxes", "states", tuple(h.job for h in handles)))
        return [xp.exit_state(0, started_at=1.0, ended_at=2.5) for _ in handles]

    def cancel(self, handles):
        CALLS.append(("boxes", "cancel", tuple(h.job for h in handles)))

    def logs(self, handle, follow):
        CALLS.append(("boxes", "logs", (handle.job,)))
        return iter(["box output\n"])


class DuoPlugin:
    XCORE_PLUGIN_API = "1.1"

    @xp.hookimpl
    def xcore_register_kinds(self, registry):
        registry.add_backend(Runs())
        registry.add_backend(Boxes())


def test_the_host_calls_the_one_backend_that_declared_the_kind(tmp_path):
    CALLS.clear()
    host = plugin_host({"duo": DuoPlugin()})
    assert {e.kind: e.backend.__class__.__name__ for e in host.kinds if e.plugin == "duo"} == {
        "duo.Duo": "Runs", "duo.DuoSpec": "Runs", "duo.DuoExecutable": "Runs", "duo.RunHandle": "Runs",
        "duo.BoxHandle": "Boxes"}
    executable = host.package(xm.binary(DuoSpec(), "true"), make_packaging_context(tmp_path))
    assert isinstance(executable, DuoExecutable)
    requests = [make_request(executable, Duo()), make_request(executable, Duo(box=True))]
    run, box = host.launch("duo.Duo", requests, make_launch_context(tmp_path / "state"))
    assert (type(run), type(box)) == (RunHandle, BoxHandle)
    assert host.job_states("duo.BoxHandle", [box])[0].ended_at == 2.5
    assert host.job_states("duo.RunHandle", [run])[0].status is xp.Status.RUNNING
    host.cancel("duo.BoxHandle", [box])
    assert "".join(host.job_logs("duo.RunHandle", run, False)) == "run output\n"
    assert host.wait_for_change("duo.RunHandle", [run], 0.01) is False  # not written: the core sleeps
    assert host.adopt("duo.Duo", requests, make_launch_context(tmp_path / "state")) is None  # cannot tell
    assert [(who, what) for who, what, _ in CALLS] == [
        ("runs", "package"), ("runs", "launch"), ("boxes", "states"), ("runs", "states"), ("boxes", "cancel"),
        ("runs", "logs")]
    assert set(host.infos["duo"].hooks) == {"xcore_register_kinds", "xcore_package", "xcore_launch",
                                             "xcore_job_states", "xcore_cancel", "xcore_job_logs"}


def test_a_backend_and_a_module_level_plugin_work_side_by_side(xcore_home):
    CALLS.clear()
    plugin_host({"duo": DuoPlugin(), "fake": fake})
    with xm.create_experiment("both forms") as experiment:
        [duo_exe, fake_exe] = experiment.package([xm.binary(DuoSpec(), "true"), xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(duo_exe, Duo(box=True)))
        experiment.add(xm.Job(fake_exe, fake.FakeExecutor()))
    units = experiment.work_units
    assert units[1].get_status().status is xm.Status.COMPLETED  # the Boxes backend says so
    assert units[2].get_status().status is xm.Status.COMPLETED  # the fake's xcore_job_states says so
    assert ("boxes", "states") in [(who, what) for who, what, _ in CALLS]


class Incomplete(xp.Backend):
    kinds = (RunHandle,)

    def states(self, handles):
        return []


def test_a_backend_lacking_a_method_its_kinds_need_fails_to_load_naming_it():
    class Plugin:
        @xp.hookimpl
        def xcore_register_kinds(self, registry):
            registry.add_backend(Incomplete())

    host = PluginHost(load_entry_points=False)
    host.register(Plugin(), "incomplete")
    with pytest.raises(PluginLoadError, match=r"Incomplete serves the job handle RunHandle but does not "
                                              r"implement cancel, logs"):
        _ = host.kinds


def test_add_backend_takes_a_backend_with_kinds():
    class Empty(xp.Backend):
        pass

    registry = PluginHost(load_entry_points=False).kinds.scoped("x")
    with pytest.raises(TypeError, match="declares no kinds"):
        registry.add_backend(Empty())
    with pytest.raises(TypeError, match="takes a Backend instance"):
        registry.add_backend(Runs)  # the class, not an instance
