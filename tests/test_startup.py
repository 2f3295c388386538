"""The CLI's startup path imports no plugin and no heavy module it does not need.

Each check runs the real CLI in a fresh interpreter and reads ``sys.modules`` at exit, so an
import added anywhere on the path (a plugin's hook module, asyncio, attrs, ...) fails it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from startup_checks import FAKE_ONLY, modules_after, offenders

from core_helpers import run_xcore

HEAVY = ("typing", "asyncio", "attrs", "cattrs", "pluggy", "importlib.metadata", "email", "zipfile", "shutil", "bz2",
         "lzma",
         "xcore.launch.experiment", "xcore.hooks.host", "xcore.runtime.launcher")
PLUGINS = ("xlocal", "xhpc", "xinline")


# A plugin made for these tests, installed by putting its module and metadata on PYTHONPATH.
_HOOKY = """
from xcore.hooks.markers import hookimpl


def add_parser(subparsers):
    p = subparsers.add_parser("hooky-hello", help="say hello")
    p.set_defaults(func=lambda args: print("hello from hooky") or 0)


@hookimpl
def xcore_add_commands(subparsers):
    add_parser(subparsers)
"""


def _site_with_hooky(tmp_path: Path, entry_points: str) -> dict[str, str]:
    """A directory holding the plugin ``hooky`` with these entry points; the environment that installs it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "hooky.py").write_text(_HOOKY)
    info = site / "xcore_hooky-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xcore-hooky\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return {"PYTHONPATH": str(site)}


def test_help_imports_no_plugin_and_no_heavy_module(tmp_path):
    modules, out = modules_after(["--help"], tmp_path)
    assert offenders(modules, PLUGINS) == []
    assert offenders(modules, HEAVY) == []
    assert "launch" in out and "list" in out


DECLARED = "[xcore]\nhooky = hooky\n[xcore.commands]\nhooky-hello = hooky:add_parser\n"


def test_help_lists_plugin_commands_declared_in_metadata_without_importing_them(tmp_path):
    """(xhpc's `cluster`, the same way: plugins/xhpc/tests/test_xhpc_startup.py.)"""
    env = _site_with_hooky(tmp_path, DECLARED)
    modules, out = modules_after(["--help"], tmp_path, env=env)
    assert "hooky-hello" in out  # hooky declares it in its xcore.commands entry points
    assert offenders(modules, ("hooky",)) == []


def test_a_command_builds_only_its_own_parser_and_helps_as_the_full_one():
    """Issue 31: `xcore list` builds list's arguments, not the twenty other commands'; the help
    of the top level and of each command reads as with every parser built."""
    from xcore.cli.main import build_parser

    full = build_parser(with_plugins=False)
    commands = next(a for a in full._actions if a.dest == "command").choices
    only_list = build_parser(with_plugins=False, command="list")
    built = next(a for a in only_list._actions if a.dest == "command").choices
    assert list(built) == list(commands)
    assert [a.dest for a in built["show"]._actions] == ["help"]  # listed, not built
    assert build_parser(with_plugins=False, command="").format_help() == full.format_help()
    for name, parser in commands.items():
        alone = next(a for a in build_parser(with_plugins=False, command=name)._actions if a.dest == "command")
        assert alone.choices[name].format_help() == parser.format_help(), name
    args = only_list.parse_args(["list", "--limit", "3", "--json"])
    assert (args.limit, args.json, args.func) == (3, True, "xcore.cli.commands:list_")


def test_list_on_empty_store_imports_no_plugin_and_no_asyncio(tmp_path):
    modules, _ = modules_after(["list"], tmp_path)
    assert offenders(modules, PLUGINS) == []
    heavy = ("asyncio", "cattrs", "pluggy", "importlib.metadata", "xcore.launch.experiment", "bz2")
    assert offenders(modules, heavy) == []


def test_list_on_existing_empty_store_reads_it_without_the_store_code(tmp_path):
    """Issue 14: the common first command answers from one read-only query: no attrs, no
    records, no schema check or migration through the store module."""
    modules_after(["list"], tmp_path)  # creates the store, through the usual path
    store = tmp_path / "xcore.db"
    before = store.stat().st_mtime_ns
    modules, out = modules_after(["list", "--json"], tmp_path)
    assert json.loads(out) == []
    assert offenders(modules, ("attrs", "xcore.store.sqlite", "xcore.store.records", "xcore.store.base")) == []
    assert store.stat().st_mtime_ns == before  # read, not written


def test_fast_list_finds_the_store_where_paths_puts_it(tmp_path, monkeypatch):
    from xcore import paths
    from xcore.cli.fast_paths import store_path

    for name in ("XCORE_STORE", "XCORE_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    settings = [{}, {"XDG_DATA_HOME": str(tmp_path / "data")}, {"XCORE_HOME": "~/state"},
                {"XCORE_STORE": f"sqlite:///{tmp_path}/a b?#%.db"}, {"XCORE_STORE": "sqlite:relative.db"}]
    for env in settings:
        with monkeypatch.context() as m:
            for key, value in env.items():
                m.setenv(key, value)
            url = paths.store_url()  # parsed as xcore.store.sqlite.open_url parses it
            expected = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url.removeprefix("sqlite:")
            assert store_path() == expected, env
    monkeypatch.setenv("XCORE_STORE", "postgresql://db/xcore")
    assert store_path() is None


def test_list_with_an_experiment_takes_the_usual_path(tmp_path):
    from xcore.store.sqlite import SqliteStore

    SqliteStore(tmp_path / "xcore.db").create_experiment("shown")
    modules, out = modules_after(["list", "--json"], tmp_path)
    assert [e["title"] for e in json.loads(out)] == ["shown"]
    assert "xcore.store.sqlite" in modules


def test_declared_plugin_command_runs_and_imports_its_plugin(tmp_path):
    env = {"XCORE_HOME": str(tmp_path / "home"), **_site_with_hooky(tmp_path, DECLARED)}
    result = run_xcore("hooky-hello", env=env)
    assert result.returncode == 0, result.stderr
    assert "hello from hooky" in result.stdout


def test_plugin_command_added_only_by_hook_still_runs(tmp_path, monkeypatch):
    """A plugin that declares no ``xcore.commands`` entry point: its command is found by
    loading the plugins when the command is not a known one."""
    env = {"XCORE_HOME": str(tmp_path / "home"), **_site_with_hooky(tmp_path, "[xcore]\nhooky = hooky\n")}
    result = run_xcore("hooky-hello", env=env)
    assert result.returncode == 0, result.stderr
    assert "hello from hooky" in result.stdout


def test_cli_remembers_gettext_lookups_only_while_parsing(tmp_path, monkeypatch, capsys):
    """argparse's strings cost a locale-directory search each; main() remembers the answers
    while it parses, and gives the command (a launch script) the real gettext.find back."""
    import gettext

    import pytest

    from xcore.cli.main import main

    monkeypatch.setenv("XCORE_HOME", str(tmp_path))
    original = gettext.find
    calls = []
    monkeypatch.setattr(gettext, "find", lambda *a, **k: calls.append(a) or original(*a, **k))
    wrapped = gettext.find
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "launch" in capsys.readouterr().out
    assert gettext.find is wrapped
    assert 0 < len(calls) <= 3  # one search per (domain, directory), not one per string


def test_a_plain_launch_imports_no_asyncio_nor_archive_modules(tmp_path):
    """`xcore launch --wait` of a plain (not async) sweep: none of the modules it used to import
    for nothing (asyncio with ssl, shutil with bz2 and lzma, tempfile, difflib). On the fake
    backend alone (an installed plugin's hook module is imported by the tracker hook: its imports
    are its own); with xlocal's processes: plugins/xlocal/tests/test_local_startup.py; that the
    tracker hook builds no other plugin's kinds: plugins/xhpc/tests/test_xhpc_startup.py."""
    script = tmp_path / "sweep.py"
    script.write_text(textwrap.dedent("""
        import xcore as xm
        from xcore.testing import fake
        with xm.create_experiment("plain") as experiment:
            [exe] = experiment.package([xm.binary(fake.FakeSpec(), "/bin/true")])
            for i in range(2):
                experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"seed": i}))
    """))
    modules, _ = modules_after(["launch", "--wait", str(script)], tmp_path, prelude=FAKE_ONLY)
    assert offenders(modules, ("asyncio", "ssl", "shutil", "bz2", "lzma", "tempfile", "difflib")) == []
    # The executor, executable and handles are plain: written without cattrs (hooks/serialization.py).
    assert offenders(modules, ("cattrs",)) == []


def test_launch_imports_with_the_collector_off_and_freezes_what_it_imported(tmp_path):
    """What `xcore launch` imports before the script (~100,000 objects, all living to the end)
    is not walked by the collector: no collection runs between main() and the script's first
    line (there were 38, ~5 ms), and those objects are frozen out of later collections' way."""
    script = tmp_path / "gc_probe.py"
    script.write_text(textwrap.dedent("""
        import gc, json, os
        with open(os.environ["GC_OUT"], "w") as f:
            json.dump({"collections": [g["collections"] for g in gc.get_stats()], "frozen": gc.get_freeze_count(),
                       "enabled": gc.isenabled()}, f)
    """))
    code = textwrap.dedent(f"""
        import gc, json, os, sys
        from xcore.cli.main import main
        before = [g["collections"] for g in gc.get_stats()]
        code = main(["launch", {str(script)!r}])
        assert gc.isenabled(), "main() left the collector off"
        with open(os.environ["GC_OUT"] + ".before", "w") as f:
            json.dump(before, f)
        sys.exit(code)
    """)
    out = tmp_path / "gc.json"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "XCORE_HOME": str(tmp_path), "GC_OUT": str(out)})
    assert result.returncode == 0, result.stderr
    at_script = json.loads(out.read_text())
    assert at_script["collections"] == json.loads(Path(f"{out}.before").read_text())
    assert at_script["enabled"] and at_script["frozen"] > 10_000


def test_the_core_classes_build_without_tokenizing_a_builtin_signature():
    """attrs reads each converter's signature; for a builtin (``converter=tuple``) that means
    tokenizing its text signature, compiling tokenize's patterns (~2 ms of every launch)."""
    code = textwrap.dedent("""
        import tokenize
        import xcore as xm
        from xcore.model import bazel, executables, packagables
        from xcore.testing import fake
        xm.binary(fake.FakeSpec(), "/bin/true")  # xlocal's classes: plugins/xlocal/tests/test_local_classes.py
        assert tokenize._compile.cache_info().currsize == 0, "a builtin converter's signature was tokenized"
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
