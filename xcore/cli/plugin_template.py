"""``xcore plugin new NAME``: generate a plugin distribution whose tests pass out of the box.

The distribution holds a working executor (``NAME/hooks.py``, local detached processes, on
the public plugin API only), a README, a pyproject with the ``xcore`` entry point
and tests that run the plugin contract suite (``xcore.testing.contract``).
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


def render(text: str, name: str) -> str:
    camel = "".join(part.capitalize() for part in name.split("_"))
    return (text.replace("__CORE_REQUIREMENT__", core_requirement())
            .replace("__CAMEL__", camel).replace("__NAME__", name))


def generate(name: str, parent: Path) -> Path:
    """Write the distribution ``xcore-NAME`` under ``parent``; return its directory."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name) or name in ("xcore", "test", "tests"):
        raise ConfigurationError(
            f"Plugin name {name!r} is not usable: write a lowercase Python identifier "
            "(letters, digits, underscores), e.g. `xcore plugin new mycluster`.")
    target = parent / f"xcore-{name}"
    if target.exists():
        raise ConfigurationError(f"{target} exists already: choose another name or remove it.")
    templates = resources.files("xcore.cli") / "templates"
    for template, relpath in FILES.items():
        path = target / relpath.replace("__NAME__", name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render((templates / template).read_text(encoding="utf-8"), name), encoding="utf-8")
    return target


def add_parser(sub: argparse._SubParsersAction) -> None:
    plugin = sub.add_parser("plugin", help="tools for plugin authors")
    commands = plugin.add_subparsers(dest="plugin_command", metavar="COMMAND")
    plugin.set_defaults(func=lambda args: plugin.print_help() or 2)
    new = commands.add_parser("new", help="generate a new plugin distribution (xcore-NAME/)",
                              description="Generate xcore-NAME/: a working executor, its entry point and "
                              "tests that run the plugin contract suite.")
    new.add_argument("name", help="the plugin's name: its kinds are NAME.*, its package NAME")
    new.add_argument("--dir", default=".", help="where to create xcore-NAME/ (default: here)")
    new.set_defaults(func="xcore.cli.plugin_template:new_command")


def new_command(args: argparse.Namespace) -> int:
    target = generate(args.name, Path(args.dir))
    print(f"created {target}\nnext:\n  cd {target}\n  pip install -e '.[test]'\n  pytest")
    return 0
