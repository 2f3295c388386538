"""``xcore plugin new NAME``: generate a plugin distribution whose tests pass out of the box.

The distribution holds a working executor (``NAME/hooks.py``: a ``Backend`` running local
detached processes, on the public plugin API only), a README, a pyproject with the ``xcore``
entry point and the kinds it declares, a ``.gitignore`` and tests that run the plugin
contract suite (``xcore.testing.contract``). The executor class is named after the plugin
(``myplugin`` -> ``Myplugin``) or by ``--executor Tmux``, and the other classes after it
(``TmuxSpec``, ``TmuxExecutable``, ``TmuxHandle``, ``TmuxBackend``) in every file, so no
rename is left to do by hand.
"""

from __future__ import annotations

import argparse
import keyword
import re
from importlib import metadata, resources
from pathlib import Path

from xcore.errors import ConfigurationError

FILES = {  # template -> path in the distribution
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "gitignore.tmpl": ".gitignore",
    "init.py.tmpl": "__NAME__/__init__.py",
    "hooks.py.tmpl": "__NAME__/hooks.py",
    "test_contract.py.tmpl": "tests/test_contract.py",
}


def core_requirement() -> str:
    """The requirement on the installed core's distribution, for the same minor version."""
    dist = (metadata.packages_distributions().get("xcore") or ["xcore"])[0]
    try:
        major, minor = metadata.version(dist).split(".")[:2]
    except metadata.PackageNotFoundError:
        return dist
    return f"{dist}>={major}.{minor},<{major}.{int(minor) + 1}"


def render(text: str, name: str, executor: str | None = None) -> str:
    """The template with the plugin's names: ``__NAME__`` the package, ``__EXECUTOR__`` the
    executor class and the start of the others' (default: the name in CamelCase)."""
    executor = executor or "".join(part.capitalize() for part in name.split("_"))
    return (text.replace("__CORE_REQUIREMENT__", core_requirement())
            .replace("__EXECUTOR__", executor).replace("__NAME__", name))


def generate(name: str, parent: Path, executor: str | None = None) -> Path:
    """Write the distribution ``xcore-NAME`` under ``parent``; return its directory."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name) or name in ("xcore", "test", "tests"):
        raise ConfigurationError(
            f"Plugin name {name!r} is not usable: write a lowercase Python identifier "
            "(letters, digits, underscores), e.g. `xcore plugin new mycluster`.")
    if executor is not None and not re.fullmatch(r"[A-Z][a-z][A-Za-z0-9]*", executor):
        raise ConfigurationError(
            f"Executor name {executor!r} is not usable: write a class name in CamelCase (an uppercase letter, "
            "a lowercase one, then letters and digits), e.g. `--executor Tmux`.")
    target = parent / f"xcore-{name}"
    if target.exists():
        raise ConfigurationError(f"{target} exists already: choose another name or remove it.")
    templates = resources.files("xcore.cli") / "templates"
    for template, relpath in FILES.items():
        path = target / relpath.replace("__NAME__", name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render((templates / template).read_text(encoding="utf-8"), name, executor), encoding="utf-8")
    return target


def new_command(args: argparse.Namespace) -> int:
    target = generate(args.name, Path(args.dir), getattr(args, "executor", None))
    print(f"created {target}\nnext:\n  cd {target}\n  pip install -e '.[test]'\n  pytest")
    return 0
