"""The plugin host: entry points, load failures, switches, conflicts, unknown kinds."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

import xcore
from core_helpers import run_xcore, write_script
from xcore.errors import DuplicateKindError, PackagingError, PluginLoadError, UnknownKindError
from xcore.hooks.host import PluginHost
from xcore.model.job_blocks import Executor


def make_distribution(site: Path, dist: str, ep_name: str, module: str, code: str, version: str = "1.2.3",
                      kinds: list[str] | None = None) -> None:
    """A real installed distribution (dist-info with an entry point, and ``kinds`` declared in
    ``xcore.kinds`` when given) on a path we put on sys.path."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(code))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    declared = "".join(f"{kind} = {ep_name}\n" for kind in kinds or ())
    (info / "entry_points.txt").write_text(
        f"[xcore]\n{ep_name} = {module}\n" + (f"[xcore.kinds]\n{declared}" if kinds else ""))


def thing_plugin(*kinds: str) -> str:
    """A plugin module registering one executor class per kind."""
    lines = ["import attrs, xcore", "from xcore.model.job_blocks import Executor",
             "@xcore.hookimpl", "def xcore_register_kinds(registry):"]
    lines += [f"    registry.add({kind!r}, attrs.define(type({kind.replace('.', '_')!r}, (Executor,), {{}})))"
              for kind in kinds] or ["    pass"]
    return "\n".join(lines) + "\n"


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
        from xcore.model.job_blocks import Executor

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
    from xcore.model.execution import PackagingContext
    from xcore.progress import Progress

    with pytest.raises(PackagingError, match="No installed plugin can package 'xcore.Binary'"):
        host.package(xcore.binary(OtherSpec(), "/bin/true"), PackagingContext(Path("/tmp"), Progress(enabled=False)))


FIRST_PARTY = ("xlocal", "xhpc", "xk8s", "xgcp")


IMPORTED_AFTER = """
import sys
from xcore.hooks.host import PluginHost
host = PluginHost()
try:
    host.kinds.entry(sys.argv[1])
except Exception as exc:
    print(exc)
print(" ".join(m for m in sys.argv[2:] if m in sys.modules))
"""


def imported_after_lookup(kind: str) -> list[str]:
    """The first-party plugins (and the core's bazel module) a fresh process imports to look
    ``kind`` up, and the lookup's error, if any."""
    out = subprocess.run([sys.executable, "-c", IMPORTED_AFTER, kind, *FIRST_PARTY, "xcore.model.bazel"],
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def test_a_declared_kind_imports_only_the_plugin_declaring_it():
    assert imported_after_lookup("xlocal.ProcessHandle") == ["xlocal"]
    assert imported_after_lookup("xhpc.SlurmHandle") == ["xhpc"]
    assert "xcore.Binary" in {e.kind for e in PluginHost().kinds}  # listed all the same
    # a kind no installed plugin declares imports none of them (each one declares its kinds)
    error, imported = imported_after_lookup("nobody.Thing")
    assert imported == "" and "pip install xcore-nobody" in error
    # the core's own kinds are declared too: registered (importing their modules) only when needed
    assert imported_after_lookup("xcore.Binary") == ["xcore.model.bazel"]


def test_every_first_party_plugin_declares_exactly_its_kinds_and_all_are_listed():
    infos = {p.name: p for p in PluginHost().plugins()}
    for name in FIRST_PARTY:
        assert infos[name].status == "loaded" and infos[name].error is None, infos[name]
        assert infos[name].kinds and all(kind.startswith(f"{name}.") for kind in infos[name].kinds)


def test_class_of_a_plugin_not_imported_yet_finds_its_kind():
    from xhpc.executors import Slurm

    assert PluginHost().kinds.kind_of(Slurm) == "xhpc.Slurm"


def test_a_hook_call_imports_every_plugin_but_registers_no_declared_kind():
    """A tracker hook call (``host.pm``) imports every plugin's hook module; the kinds they
    declare are still registered only when one is needed (issue 14: a local sweep built xhpc's
    17 classes on its first add), by kind, by class or by listing them all."""
    from xhpc.executors import Slurm

    for look_up in (lambda host: host.kinds.entry("xhpc.Slurm").cls is Slurm,
                    lambda host: host.kinds.kind_of(Slurm) == "xhpc.Slurm",
                    lambda host: "xhpc.Slurm" in {e.kind for e in host.kinds}):
        host = PluginHost()
        assert host.kinds.entry("xlocal.Local").plugin == "xlocal"
        host.load_plugins()  # as a tracker hook call does (host.pm)
        assert {"xlocal", "xhpc"} <= {name for name, _ in host.pm.list_name_plugin()}
        assert host.kinds.kinds_of("xhpc") == set() and host._infos["xhpc"].kinds == []
        assert look_up(host)
        assert "xhpc.GridEngineHandle" in host.kinds.kinds_of("xhpc")
        assert "xhpc.GridEngineHandle" in host._infos["xhpc"].kinds


def test_a_plugin_imported_by_a_hook_call_whose_kinds_differ_still_fails_loudly(site):
    make_distribution(site, "xcore-liar", "liar", "liar_plugin", thing_plugin("liar.A", "liar.B"), kinds=["liar.A"])
    host = PluginHost()
    host.kinds.entry("xlocal.Local")
    host.load_plugins()  # imports the liar: its kinds are checked when one is needed
    with pytest.raises(PluginLoadError, match="registered, not declared: liar.B"):
        host.kinds.entry("liar.A")
    assert host._infos["liar"].status == "failed"
    assert "xlocal.Local" in {e.kind for e in host.kinds}  # listing every kind still works


def test_old_plugin_declaring_nothing_is_loaded_for_any_kind(site):
    make_distribution(site, "xcore-old", "old", "old_plugin", thing_plugin("old.Thing"))
    host = PluginHost()
    assert host.kinds.entry("xlocal.Local").plugin == "xlocal"
    assert host._infos["old"].kinds == ["old.Thing"] and host.kinds.owner("old.Thing") == "old"


def test_two_plugins_declaring_one_kind_is_an_error_naming_both(site):
    make_distribution(site, "xcore-alpha", "alpha", "alpha_plugin", thing_plugin("shared.Thing"),
                      kinds=["shared.Thing"])
    make_distribution(site, "xcore-beta", "beta", "beta_plugin", thing_plugin("shared.Thing"),
                      kinds=["shared.Thing"])
    host = PluginHost()
    for _ in range(2):  # every lookup, of any kind, says so (as when all plugins were imported)
        with pytest.raises(DuplicateKindError, match="declared by two plugins") as info:
            host.kinds.entry("xlocal.Local")
        assert "'alpha' (xcore-alpha)" in str(info.value) and "'beta' (xcore-beta)" in str(info.value)
    result = run_xcore("plugins", "--json")  # the listing still shows every plugin, and the conflict
    data = {p["name"]: p for p in json.loads(result.stdout)}
    assert set(FIRST_PARTY) | {"alpha", "beta"} <= set(data)
    assert "declared by two plugins" in data["alpha"]["error"]


def test_plugin_registering_a_kind_another_plugin_declares_is_an_error_naming_both(site):
    make_distribution(site, "xcore-thief", "thief", "thief_plugin", thing_plugin("thief.Own", "xhpc.Slurm"),
                      kinds=["thief.Own"])
    host = PluginHost()
    with pytest.raises(DuplicateKindError, match="claimed by two plugins") as info:
        host.kinds.entry("thief.Own")
    assert "'xhpc'" in str(info.value) and "'thief'" in str(info.value)
    with pytest.raises(UnknownKindError, match="thief.* failed to load: Kind 'xhpc.Slurm' is claimed"):
        host.kinds.entry("thief.Own")
    assert host.kinds.owner("xhpc.Slurm") == "xhpc"  # the rightful owner is unaffected


@pytest.mark.parametrize(("declared", "registered", "message"), [
    (["liar.A"], ["liar.A", "liar.B"], "registered, not declared: liar.B"),
    (["liar.A", "liar.C"], ["liar.A"], "declared, not registered: liar.C"),
])
def test_plugin_whose_declared_kinds_differ_from_what_it_registers_fails_loudly(site, declared, registered,
                                                                                message):
    make_distribution(site, "xcore-liar", "liar", "liar_plugin", thing_plugin(*registered), kinds=declared)
    host = PluginHost()
    with pytest.raises(PluginLoadError, match=message):
        host.kinds.entry("liar.A")
    with pytest.raises(UnknownKindError, match=f"failed to load: .*{message}"):
        host.kinds.entry("liar.A")  # and every later lookup says why
    assert not host.kinds.kinds_of("liar")
    result = run_xcore("plugins", "--json")
    data = {p["name"]: p for p in json.loads(result.stdout)}
    assert data["liar"]["status"] == "failed" and message in data["liar"]["error"]
    assert data["xlocal"]["status"] == "loaded"


def test_status_poll_of_a_running_local_job_imports_only_xlocal(tmp_path):
    """`xcore show` of an unfinished job, from a new process: the job's kind imports the plugin
    owning it, and no other installed plugin (issue 14: 0.05-0.08 s per poll)."""
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("poll") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {sys.executable!r}, args=["-c", "import time; time.sleep(30)"])])
    e.add(xm.Job(exe, xlocal.Local()))
""")
    assert run_xcore("launch", str(script)).returncode == 0
    code = ("import sys; from xcore.cli.main import main; code = main(['show', '1']); "
            f"print(*(m for m in {FIRST_PARTY!r} if m in sys.modules)); sys.exit(code)")
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert "running" in result.stdout.lower()
        assert result.stdout.splitlines()[-1] == "xlocal"
    finally:
        run_xcore("cancel", "1")


def test_threads_needing_one_kind_at_once_all_find_it():
    """Packaging runs in threads (``package_async``): a thread must not see a kind missing
    while another thread is importing the plugin that declares it."""
    import threading

    for _ in range(5):
        host = PluginHost()
        barrier = threading.Barrier(8)
        found: list[object] = []

        def look(host: PluginHost = host, barrier: threading.Barrier = barrier, found: list[object] = found) -> None:
            barrier.wait()
            try:
                found.append(host.kinds.entry("xhpc.SlurmHandle").plugin)
            except Exception as exc:  # noqa: BLE001 - what the test counts
                found.append(exc)

        threads = [threading.Thread(target=look) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert found == ["xhpc"] * 8
