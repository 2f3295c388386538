"""Meta-tests: every hook is documented and exercised by a test (datasette's habit)."""

import inspect
import re
from pathlib import Path

from xcore.hooks import specs as hookspecs

HOOKS = [name for name, fn in vars(hookspecs).items() if name.startswith("xcore_") and inspect.isfunction(fn)]


def test_every_hook_is_documented_with_its_parameters():
    assert len(HOOKS) >= 8
    for name in HOOKS:
        function = getattr(hookspecs, name)
        doc = inspect.getdoc(function) or ""
        assert len(doc.splitlines()) >= 3, f"{name} needs a docstring"
        for parameter in inspect.signature(function).parameters:
            assert parameter in doc, f"{name}'s docstring does not mention {parameter}"


def test_every_hook_is_implemented_somewhere_that_is_tested():
    root = Path(__file__).resolve().parent.parent
    files = [*(root / "plugins").rglob("hooks.py"), *(root / "xcore").rglob("builtin.py"),
             *(root / "examples").rglob("hooks.py")]
    sources = "".join(p.read_text() for p in files)
    for name in HOOKS:
        assert re.search(rf"def {name}\(", sources), f"no plugin implements {name}"
