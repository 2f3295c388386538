"""Plugins import the core only through its public surface: ``xcore``, ``xcore.plugin`` and
``xcore.testing`` (issue 7). Checked on the source's import statements (AST), for every
module of each plugin package."""

from __future__ import annotations

import ast
from pathlib import Path

import xcore

REPO = Path(__file__).resolve().parent.parent
ALLOWED_MODULES = {"xcore", "xcore.plugin", "xcore.testing", "xcore.images"}
ALLOWED_FROM_XCORE = set(xcore.__all__) | {"plugin", "testing", "images", "__version__"}


def private_imports(package: Path, root: Path = REPO) -> list[str]:
    """``file:line: statement`` for each import of a core module outside the public surface."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "xcore" and alias.name not in ALLOWED_MODULES:
                        found.append(f"{where}: import {alias.name}")
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] != "xcore":
                    continue
                if node.module not in ALLOWED_MODULES:
                    found.append(f"{where}: from {node.module} import ...")
                elif node.module == "xcore":
                    found += [f"{where}: from xcore import {a.name}" for a in node.names
                              if a.name not in ALLOWED_FROM_XCORE]
    return found


def test_the_checker_sees_private_imports(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "m.py").write_text(
        "import xcore\nfrom xcore.plugin import hookimpl\nfrom xcore import paths\nimport xcore.hooks.kinds\n"
        "from xcore.errors import LaunchError\nfrom xcore.testing import fake\n")
    assert [line.split(": ", 1)[1] for line in private_imports(tmp_path / "p", tmp_path)] == [
        "from xcore import paths", "import xcore.hooks.kinds", "from xcore.errors import ..."]


def test_the_example_plugin_imports_only_the_public_surface():
    assert private_imports(REPO / "examples/plugins/xcore-inline/xinline") == []


def test_xlocal_imports_only_the_public_surface():
    assert private_imports(REPO / "plugins/xlocal/xlocal") == []


def test_xhpc_imports_only_the_public_surface():
    assert private_imports(REPO / "plugins/xhpc/xhpc") == []
