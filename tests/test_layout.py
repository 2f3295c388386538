"""The core's layout shows its faces (issue 7): the launch API, the plugin API, the metadata
store and the CLI each live in a package (see docs/life-of-a-job.md). These tests keep it so:
a new top-level module is a decision, not an accident, and no face depends on the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

XCORE = Path(__file__).resolve().parent.parent / "xcore"

TOP_LEVEL = {
    # the public entry points
    "__init__.py", "plugin.py", "testing",
    # the faces and what runs behind them
    "launch", "runtime", "hooks", "plumbing", "store", "cli", "ui", "trackers",
    "images",  # the image builder container backends share (being added in parallel)
    # shared by every face
    "errors.py", "status.py", "paths.py", "lazy.py", "settings.py",
    "datamodel.py",  # the attrs decorators of the data model (status.py, the store, launch, hooks)
}


def test_the_top_level_holds_only_the_faces_and_what_they_share():
    found = {p.name for p in XCORE.iterdir() if p.name != "__pycache__" and not p.name.startswith(".")}
    assert found - TOP_LEVEL == set(), "put a new module in the package of its face (see docs/life-of-a-job.md)"
    assert {"launch", "runtime", "hooks", "store", "cli", "plugin.py", "testing"} <= found


def test_every_package_says_what_it_is_for():
    for init in XCORE.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init.relative_to(XCORE.parent)} needs a docstring"


def _imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


def test_no_face_but_the_cli_imports_the_cli():
    offenders = [
        f"{path.relative_to(XCORE.parent)}: {module}"
        for package in ("launch", "runtime", "hooks", "plumbing", "store", "trackers")
        for path in sorted((XCORE / package).rglob("*.py"))
        for module in sorted(_imported_modules(path))
        if module.split(".")[:2] in (["xcore", "cli"], ["xcore", "ui"])
    ]
    assert offenders == []
