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
    """In both forms: each hook as a module-level function (the fake backend, the example
    plugin, the built-ins, the plugins' plugin-wide hooks), and each ``Backend`` method by a
    plugin's backend."""
    from xcore.hooks.backend import HOOK_OF

    root = Path(__file__).resolve().parent.parent
    files = [*(root / "plugins").rglob("hooks.py"), *(root / "xcore").rglob("builtin.py"),
             *(root / "examples").rglob("hooks.py"), root / "xcore/testing/fake.py"]
    sources = "".join(p.read_text() for p in files)
    for name in HOOKS:
        assert re.search(rf"def {name}\(", sources), f"no plugin implements {name}"
    backends = "".join(text for p in (root / "plugins").rglob("*.py")
                       if re.search(r"\((xp\.)?Backend\):", text := p.read_text()))
    for method in HOOK_OF:
        assert re.search(rf"    def {method}\(self", backends), f"no plugin's backend implements {method}"


def test_every_backend_method_is_a_hook_without_its_kind_argument():
    """``Backend``'s methods mirror the execution hooks (the host passes the same arguments, less
    the kind) and their docstrings name the hook whose docstring is the reference."""
    from xcore.hooks.backend import HOOK_OF, Backend

    assert set(HOOK_OF.values()) <= set(HOOKS)
    for method, hook in HOOK_OF.items():
        hook_params = [p for p in inspect.signature(getattr(hookspecs, hook)).parameters
                       if p not in ("executor_kind", "handle_kind")]
        method_params = list(inspect.signature(getattr(Backend, method)).parameters)[1:]
        assert method_params == hook_params, method
        assert f"``{hook}``" in (inspect.getdoc(getattr(Backend, method)) or ""), method
