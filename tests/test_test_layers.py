"""The tests follow the layers (issue 25): the core's tests (``tests/``) use the fake backend
(``xcore.testing.fake``), a plugin's tests live in ``plugins/<name>/tests``. Checked on the
source (AST): an import of a plugin package, or a script in a string that imports one (run in a
new process), is allowed only in the modules listed here, each with its reason."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLUGINS = ("xlocal", "xhpc", "xk8s", "xgcp")
SCRIPT_IMPORT = re.compile(rf"^\s*(?:import|from)\s+({'|'.join(PLUGINS)})\b", re.MULTILINE)

ALLOWED = {
    # The plugin host with the real installed plugins: listing, enabling, disabling them.
    "test_plugins.py": "lists and filters the installed plugins",
    # write_script (a launch script importing xlocal) serves the CLI tests (test_cli.py) and
    # xlocal's moved tests; the core's own tests use write_fake_script and run_xcore_fake.
    "core_helpers.py": "write_script, for launch scripts on xlocal",
    # The port tool rewrites these import lines as text; nothing imports them.
    "test_xm_compat_port.py": "the xm port tool's input, as text",
    # The checker's own examples, below.
    "test_test_layers.py": "the checker's examples",
    # Owned by the Workspace work (issue 25): to switch to the fake backend there (test_cli.py
    # too, through core_helpers.write_script).
    "test_cli_hardening.py": "to switch to the fake backend (Workspace)",
    "test_ui_browser.py": "to switch to the fake backend (Workspace)",
    # Owned by the backends-as-objects work (issue 25): the contract suite run on a plugin
    # belongs with that plugin (plugins/<name>/tests).
    "test_contract_xlocal.py": "to move to plugins/xlocal/tests (backends)",
    "test_contract_xlocal_containers.py": "to move to plugins/xlocal/tests (backends)",
    "test_contract_xhpc.py": "to move to plugins/xhpc/tests (backends)",
}


def plugin_imports(path: Path) -> list[str]:
    """``line: what`` for each import of a plugin package in ``path``, in code or in a script string."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in PLUGINS]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in PLUGINS:
            found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [f"{node.lineno}: script imports {name}" for name in SCRIPT_IMPORT.findall(node.value)]
    return found


def test_core_tests_import_no_plugin_outside_the_allow_list():
    offenders = {}
    for path in sorted((REPO / "tests").rglob("*.py")):
        name = str(path.relative_to(REPO / "tests"))
        if name not in ALLOWED and (found := plugin_imports(path)):
            offenders[name] = found
    assert offenders == {}, "core tests use xcore.testing.fake; a plugin's tests go to plugins/<name>/tests"


def test_the_allow_list_names_only_modules_that_still_need_it():
    stale = [name for name in ALLOWED if not (REPO / "tests" / name).exists()
             or not plugin_imports(REPO / "tests" / name)]
    assert stale == [], "drop these from ALLOWED"


def test_the_checker_sees_imports_in_code_and_in_scripts(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import xlocal.processes\nfrom xhpc import x\nimport xcore\nfrom xlocalish import y\n"
                      "def f():\n    from xgcp.hooks import z\n"
                      "SCRIPT = '''\\nimport sys\\n    import xk8s\\n'''\nTEXT = 'see xlocal.Local'\n")
    assert [line.split(": ", 1)[1] for line in plugin_imports(module)] == [
        "import xlocal.processes", "from xhpc import ...", "from xgcp.hooks import ...", "script imports xk8s"]


def test_every_plugins_tests_are_collected():
    """CI runs ``pytest`` from the repository root: its testpaths name every plugin's tests."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    plugin_tests = sorted(str(p.relative_to(REPO)) for p in (REPO / "plugins").glob("*/tests"))
    assert set(plugin_tests) <= set(config["testpaths"]) and "tests" in config["testpaths"]
