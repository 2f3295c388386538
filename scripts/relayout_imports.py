"""Rewrites imports of xcore's old flat layout (``xcore.experiment``, ``xcore.plugins``,
``xcore.sqlite_store``...) to the layout by face (``xcore/launch``, ``runtime``, ``hooks``,
``store``; see docs/life-of-a-job.md). For merging branches written against the old layout:

    python scripts/relayout_imports.py            # every tracked .py/.md/.toml/.sh/.tmpl/.cfg file
    python scripts/relayout_imports.py FILE...    # just these

then ``ruff check --fix`` sorts the rewritten imports. Running it twice changes nothing.
Plugins and examples keep the public ``from xcore import core, job_operators``.
"""

from __future__ import annotations

import re
import subprocess
import sys

MOVES = {
    "job_blocks": "launch.job_blocks", "executables": "launch.executables", "packagables": "launch.packagables",
    "resources": "launch.resources", "args": "launch.args", "units": "launch.quantities",
    "job_operators": "launch.job_operators", "bazel": "launch.bazel", "core": "launch.core", "utils": "launch.utils",
    "vcs": "launch.vcs", "launcher": "runtime.launcher", "tracking": "runtime.tracking", "orphans": "runtime.orphans",
    "progress": "runtime.progress", "results": "runtime.results", "hookspecs": "hooks.specs", "plugins": "hooks.host",
    "kinds": "hooks.kinds", "entry_points": "hooks.entry_points", "markers": "hooks.markers",
    "execution": "hooks.execution", "builtin": "hooks.builtin", "validation": "hooks.validation",
    "serialization": "hooks.serialization", "records": "store.records", "sqlite_store": "store.sqlite",
    "postgres_store": "store.postgres", "store_migrations": "store.migrations", "store_copy": "store.copy",
    "redaction": "store.redaction", "port": "cli.port",
}
EXPERIMENT = {  # names of the old xcore.experiment -> their module now
    **dict.fromkeys(["Experiment", "_jsonable", "_jsonable_unit_args", "_in_coroutine", "_is_async_callable"],
                    "launch.experiment"),
    **dict.fromkeys(["ExperimentUnit", "WorkUnit", "AuxiliaryUnit", "AuxiliaryUnitJob", "AuxiliaryUnitRole",
                     "WorkUnitRole", "ExperimentUnitRole", "Importance", "MetadataContext", "ContextAnnotations",
                     "LaunchFuture", "WorkUnitCompletedAwaitable", "_address", "current_user"], "launch.units"),
    **dict.fromkeys(["create_experiment", "get_experiment", "list_experiments", "set_launch_script",
                     "created_experiment_ids", "open_store", "_script_path"], "launch.registry"),
    "package": "runtime.packaging",
    "cancel_jobs": "runtime.tracking",
}
DOTTED = re.compile(r"\bxcore\.(" + "|".join(sorted(MOVES, key=len, reverse=True)) + r")\b(?![\w])")
FROM_EXPERIMENT = re.compile(r"^(\s*)from xcore\.experiment import (\([^)]*\)|[^\n]*)", re.M)
FROM_XCORE = re.compile(r"^(\s*)from xcore import ([^(\n]*)$", re.M)


def _names(text: str) -> list[str]:
    text = re.sub(r"#[^\n]*", "", text).strip().strip("()")
    return [n.strip() for n in text.replace("\n", " ").split(",") if n.strip()]


def _from_experiment(m: re.Match) -> str:  # its names now live in four modules
    indent, names = m.group(1), _names(m.group(2))
    by_module: dict[str, list[str]] = {}
    for name in names:
        base = name.split(" as ")[0].strip()
        if base == "_user":
            name, base = "current_user as _user", "current_user"
        by_module.setdefault(EXPERIMENT[base], []).append(name)
    return "\n".join(f"{indent}from xcore.{mod} import {', '.join(ns)}" for mod, ns in by_module.items())


PUBLIC = {"core", "job_operators"}  # exported by ``xcore`` itself: public, so plugins may use them


def _from_xcore(m: re.Match, public_only: bool) -> str:
    indent, rest = m.group(1), m.group(2)
    comment = ""
    if "#" in rest:
        rest, comment = rest.split("#", 1)
        comment = "  #" + comment
    names = _names(rest)
    moved = set(MOVES) - PUBLIC if public_only else set(MOVES)
    if not any(n.split(" as ")[0].strip() in moved for n in names):
        return m.group(0)
    groups: dict[str, list[str]] = {}
    for n in names:
        base, _, alias = n.partition(" as ")
        base = base.strip()
        if base in moved:
            pkg, _, mod = MOVES[base].rpartition(".")
            alias = alias.strip() or (base if mod != base else "")
            groups.setdefault(f"xcore.{pkg}", []).append(f"{mod} as {alias}" if alias else mod)
        else:
            groups.setdefault("xcore", []).append(n)
    lines = [f"{indent}from {pkg} import {', '.join(ns)}" for pkg, ns in groups.items()]
    lines[0] += comment
    return "\n".join(lines)


def rewrite(text: str, public_only: bool = False) -> str:
    """``text`` with old module paths replaced; ``public_only`` for plugin and example code."""
    text = FROM_EXPERIMENT.sub(_from_experiment, text)
    text = FROM_XCORE.sub(lambda m: _from_xcore(m, public_only), text)
    return DOTTED.sub(lambda m: "xcore." + MOVES[m.group(1)], text)


if __name__ == "__main__":
    files = sys.argv[1:] or subprocess.run(["git", "ls-files", "*.py", "*.md", "*.toml", "*.sh", "*.tmpl", "*.cfg"],
                                           capture_output=True, text=True, check=True).stdout.split()
    for path in files:
        try:
            old = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        new = rewrite(old, public_only=path.startswith(("plugins/", "examples/")))
        if new != old:
            open(path, "w", encoding="utf-8").write(new)
            print("rewrote", path)
