"""Meta-tests for docs/plugins.md: every hookspec has a section with its signature and an
example implementation (a ``Backend`` method for the execution hooks, a ``@hookimpl`` function
for the others), the module-level form of each execution hook is still written down, and the
contract's rules and every exported plugin-API type appear."""

from __future__ import annotations

import inspect
import re
import textwrap

from core_helpers import REPO
from xcore import plugin as xp
from xcore.hooks import specs as hookspecs
from xcore.hooks.backend import HOOK_OF

DOC = (REPO / "docs/plugins.md").read_text()
HOOKS = [name for name, fn in vars(hookspecs).items() if name.startswith("xcore_") and inspect.isfunction(fn)]


def sections() -> dict[str, str]:
    parts = re.split(r"^### ", DOC, flags=re.M)
    return {part.splitlines()[0]: part for part in parts[1:]}


METHOD_OF = {hook: method for method, hook in HOOK_OF.items()}
KIND_ARGS = ("executor_kind", "handle_kind")


def test_every_hook_has_a_section_with_its_signature_and_an_example():
    found = sections()
    for name in HOOKS:
        params = [p for p in inspect.signature(getattr(hookspecs, name)).parameters if p not in KIND_ARGS]
        method = METHOD_OF.get(name)
        heading = f"`{method or name}({', '.join(params)})`"
        assert heading in found, f"docs/plugins.md has no section '### {heading}'"
        blocks = re.findall(r"```python\n(.*?)```", found[heading], flags=re.S)
        if method:
            assert f"`{name}`" in found[heading], f"the {method} section does not name its hook {name}"
            assert any(f"def {method}(self" in block for block in blocks), \
                f"the {method} section has no example method"
        else:
            assert any(f"def {name}(" in block and "@hookimpl" in block for block in blocks), \
                f"the {name} section has no example implementation"
        compile(textwrap.dedent(blocks[0]), f"docs:{name}", "exec")  # the example is valid Python


def test_the_module_level_form_of_every_execution_hook_is_still_written_down():
    section = DOC[DOC.index("## 4b. Module-level hooks (plugin API 1.0)"):DOC.index("## 5.")]
    for name in METHOD_OF:
        params = ", ".join(inspect.signature(getattr(hookspecs, name)).parameters)
        assert f"`{name}({params})`" in section, name


def test_the_packaging_example_covers_python_module():
    section = sections()["`package(packageable, context)`"]
    assert "PythonModule" in section and "xm.python_module" in section


def test_the_rules_are_written_down():
    rules = DOC[DOC.index("## 6. The rules"):]
    for phrase in ("Exceptions", "LaunchFailure", "lost: <why>", "128 + N", "killed by signal N (SIGNAME)",
                   "UTF-8 incrementally", "follow=True", "grace period", "LaunchRequest.env", "byte for byte"):
        assert phrase in rules, phrase


def test_every_type_a_hook_receives_is_described():
    received = DOC[DOC.index("## 5. What hooks receive"):DOC.index("## 6.")]
    for name in ("LaunchRequest", "LaunchContext", "PackagingContext", "Packageable", "Progress", "JobHandle",
                 "JobState", "KindRegistrar"):
        assert f"**`{name}`**" in received, name
    for field in ("job_id", "experiment_id", "work_unit_id", "job_name", "executable", "executor", "args", "env",
                  "state_dir", "cache_dir", "experiment_title", "log_path", "error", "exit_code", "started_at",
                  "ended_at", "executable_spec", "executor_spec", "env_vars"):
        assert f"`{field}`" in received, field


def test_the_quick_start_in_the_module_docstring_names_every_export():
    doc = xp.__doc__ or ""
    missing = [name for name in xp.__all__ if f"``{name}``" not in doc]
    assert not missing, f"xcore.plugin's docstring does not mention {missing}"
