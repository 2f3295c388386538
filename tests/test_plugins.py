"""The plugin host: entry points, load failures, switches, conflicts, unknown kinds."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import attrs
import pytest

import xcore
from core_helpers import run_xcore
from xcore.errors import DuplicateKindError, PackagingError, UnknownKindError
from xcore.hooks.host import PluginHost
from xcore.launch.job_blocks import Executor


def make_distribution(site: Path, dist: str, ep_name: str, module: str, code: str, version: str = "1.2.3") -> None:
    """A real installed distribution (dist-info with an entry point) on a path we put on sys.path."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(code))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[xcore]\n{ep_name} = {module}\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.setenv("PYTHONPATH", str(path))
    return path


def test_builtin_and_xlocal_are_listed():
    names = {p.name: p for p in PluginHost().plugins()}
    assert names["xcore"].builtin and "xcore.Binary" in names["xcore"].kinds
    assert names["xlocal"].distribution == "xcore-xlocal" and "xlocal.Local" in names["xlocal"].kinds


def test_broken_plugin_is_reported_with_distribution_and_version(site):
    make_distribution(site, "xcore-broken", "broken", "broken_plugin", "import no_such_module_xyz\n")
    host = PluginHost()
    [failure] = [f for f in host.failures() if f.name == "broken"]
    assert failure.distribution == "xcore-broken" and failure.version == "1.2.3"
    assert "No module named 'no_such_module_xyz'" in failure.error
    assert any("xcore-broken 1.2.3" in w for w in host.failure_warnings())
    # unrelated commands still work, and say what is wrong
    result = run_xcore("plugins", "--json")
    assert result.returncode == 0, result.stderr
    data = {p["name"]: p for p in json.loads(result.stdout)}
    assert data["broken"]["status"] == "failed" and data["xlocal"]["status"] == "loaded"
    assert "failed to load" in result.stderr


def test_unknown_kind_from_failed_plugin_names_the_failure(site):
    make_distribution(site, "xcore-broken", "broken", "broken_plugin", "raise RuntimeError('boom')\n")
    with pytest.raises(UnknownKindError, match="installed but failed to load: RuntimeError: boom"):
        PluginHost().kinds.entry("broken.Thing")


def test_unknown_kind_names_distribution_to_install():
    with pytest.raises(UnknownKindError, match=r"pip install xcore-xhpcx"):
        PluginHost().kinds.entry("xhpcx.Slurm")


def test_disable_and_select_switches(site):
    make_distribution(site, "xcore-extra", "extra", "extra_plugin", "")
    assert PluginHost({"XCORE_DISABLE_PLUGINS": "extra"}).infos["extra"].status == "disabled"
    only = PluginHost({"XCORE_PLUGINS": "xlocal"})
    assert only.infos["extra"].status == "disabled" and only.infos["xlocal"].status == "loaded"
    none = PluginHost({"XCORE_PLUGINS": ""})
    assert {i.name for i in none.infos.values() if i.status == "loaded"} == {"xcore"}


def test_two_plugins_claiming_one_kind_is_an_error_naming_both(site):
    make_distribution(site, "xcore-rival", "rival", "rival_plugin", """
        import attrs, xcore
        from xcore.launch.job_blocks import Executor

        @attrs.define(kw_only=True)
        class Local(Executor):
            pass

        @xcore.hookimpl
        def xcore_register_kinds(registry):
            registry.add("xlocal.Local", Local)
    """)
    host = PluginHost()
    with pytest.raises(DuplicateKindError) as info:
        _ = host.kinds
    assert "'xlocal'" in str(info.value) and "'rival'" in str(info.value)


def test_hookimpl_for_a_hook_that_does_not_exist_is_rejected_at_registration(site):
    make_distribution(site, "xcore-typo", "typo", "typo_plugin", """
        import xcore

        @xcore.hookimpl
        def xcore_lanuch(executor_kind, requests, context):
            return []
    """)
    info = PluginHost().infos["typo"]
    assert info.status == "failed" and "xcore_lanuch" in info.error


def test_unregistered_executor_class_error_lists_plugins():
    @attrs.define(kw_only=True)
    class Mine(Executor):
        pass

    with pytest.raises(UnknownKindError, match=r"not registered by any installed plugin. Installed plugins: .*xlocal"):
        PluginHost().kinds.kind_of(Mine())


def test_no_plugin_can_package_pair():
    @attrs.frozen
    class OtherSpec(xcore.ExecutorSpec):
        pass

    host = PluginHost()
    from xcore.hooks.execution import PackagingContext
    from xcore.runtime.progress import Progress

    with pytest.raises(PackagingError, match="No installed plugin can package 'xcore.Binary'"):
        host.package(xcore.binary(OtherSpec(), "/bin/true"), PackagingContext(Path("/tmp"), Progress(enabled=False)))
