"""Entry points read straight from ``*.dist-info/entry_points.txt`` on ``sys.path``.

``importlib.metadata.entry_points()`` parses every installed distribution and imports
``email``, ``zipfile`` and friends; every ``xcore`` command starts by asking which plugins
exist, so that question must cost about a millisecond. Only directories are scanned (zipped
eggs do not hold plugins in practice); the first distribution on the path wins, as with
``importlib.metadata``.

Still pays (issue 25, item 5), measured on regular installs of the core, xlocal and xhpc, one
as is and one whose ``scan`` calls ``importlib.metadata.entry_points``, alternated (3 pairs of
``PYTHON bench/bench_startup.py 11``, load 4.2-5.2, 2 cores): ``xcore --help`` 25-27 ms wall
(2.4-2.5x ``python -c pass``) against 66-67 ms (5.8-6.3x), CPU 28 against 74 ms; ``xcore
list`` 29-30 against 67-69 ms. The scan alone (``PYTHON bench/bench_seams.py``): 1.8 ms of
CPU over a bare interpreter, against 43 ms for ``importlib.metadata``.
"""

from __future__ import annotations

import importlib
import os
import sys

TYPE_CHECKING = False  # not `typing`'s: this module is on every command's startup path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

PLUGINS_GROUP = "xcore"
COMMANDS_GROUP = "xcore.commands"
KINDS_GROUP = "xcore.kinds"
"""``KIND = PLUGIN``: the kinds a distribution's plugin (its ``xcore`` entry point named PLUGIN)
registers, so the host imports only the plugin owning a kind it needs (docs/plugins.md)."""


class EntryPoint:
    """One ``name = module:attr`` line of a distribution's entry points (a plain class:
    ``dataclasses`` costs more to import than the whole scan)."""

    __slots__ = ("name", "value", "group", "distribution", "version")

    def __init__(self, name: str, value: str, group: str, distribution: str | None = None,
                 version: str | None = None) -> None:
        self.name, self.value, self.group = name, value, group
        self.distribution, self.version = distribution, version

    def __repr__(self) -> str:
        return f"EntryPoint({self.name!r}, {self.value!r}, {self.group!r}, {self.distribution!r}, {self.version!r})"

    def load(self) -> object:
        module, _, attr = self.value.partition(":")
        obj: object = importlib.import_module(module.strip())
        for part in attr.strip().split(".") if attr.strip() else ():
            obj = getattr(obj, part)
        return obj


def _parse(text: str, wanted: set[str]) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section in wanted and "=" in line:
            name, _, value = line.partition("=")
            found.setdefault(section, []).append((name.strip(), value.split("[")[0].strip()))
    return found


def _name_and_version(info_dir: str, entry: str) -> tuple[str, str | None]:
    """From METADATA's headers (the real spelling, e.g. ``xcore-xlocal``), else the directory name."""
    stem = entry.rsplit(".", 1)[0]
    name, _, version = stem.partition("-")
    found_name, found_version = None, None
    for metadata_file in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(info_dir, metadata_file), encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break  # end of the headers
                    if line.startswith("Name:"):
                        found_name = line[5:].strip()
                    elif line.startswith("Version:"):
                        found_version = line[8:].strip()
                    if found_name and found_version:
                        break
            break
        except OSError:
            continue
    return found_name or name, found_version or version or None


_scanned: dict[tuple[str, ...], list[EntryPoint]] = {}


def xcore_entry_points() -> list[EntryPoint]:
    """The ``xcore``, ``xcore.commands`` and ``xcore.kinds`` entry points, scanned once per ``sys.path``."""
    key = tuple(sys.path)
    if key not in _scanned:
        _scanned.clear()
        _scanned[key] = scan({PLUGINS_GROUP, COMMANDS_GROUP, KINDS_GROUP})
    return _scanned[key]


def switch(env: Mapping[str, str], name: str) -> set[str] | None:
    """``XCORE_PLUGINS`` / ``XCORE_DISABLE_PLUGINS`` as a set of names (None when unset)."""
    value = env.get(name)
    if value is None:
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


def plugin_filter(env: Mapping[str, str]) -> Callable[[str], bool]:
    """Whether ``XCORE_PLUGINS`` / ``XCORE_DISABLE_PLUGINS`` let a plugin of that name load."""
    only = switch(env, "XCORE_PLUGINS")
    disabled = switch(env, "XCORE_DISABLE_PLUGINS") or set()
    return lambda name: (only is None or name in only) and name not in disabled


def declared_commands(env: Mapping[str, str] | None = None,
                      found: list[EntryPoint] | None = None) -> dict[str, EntryPoint]:
    """CLI commands enabled plugins declare in metadata (``xcore.commands``): no import needed."""
    enabled = plugin_filter(os.environ if env is None else env)
    found = xcore_entry_points() if found is None else found
    plugin_of = {ep.distribution: ep.name for ep in found if ep.group == PLUGINS_GROUP}
    commands: dict[str, EntryPoint] = {}
    for ep in found:
        plugin = plugin_of.get(ep.distribution)
        if ep.group != COMMANDS_GROUP or plugin is None or ep.name in commands or not enabled(plugin):
            continue
        commands[ep.name] = ep
    return commands


def may_provide(kinds: Iterable[str], env: Mapping[str, str] | None = None,
                found: list[EntryPoint] | None = None) -> bool:
    """Whether an enabled installed plugin may provide one of ``kinds``, from metadata alone:
    one that declares it (``xcore.kinds``), or one that declares no kind at all (it may register
    any). Built-in kinds (``xcore.*``) count as provided. False lets ``xcore show`` skip building
    the plugin host for jobs whose plugin is not installed (their results stay pending)."""
    allowed = plugin_filter(os.environ if env is None else env)
    found = xcore_entry_points() if found is None else found
    chosen: dict[str, str | None] = {}  # plugin -> its distribution, the first on the path winning
    for ep in found:
        if ep.group == PLUGINS_GROUP and ep.name not in chosen:
            chosen[ep.name] = ep.distribution
    enabled = {name: dist for name, dist in chosen.items() if allowed(name)}
    declared: dict[str, set[str]] = {}
    for ep in found:
        if ep.group == KINDS_GROUP and ep.value in enabled and enabled[ep.value] == ep.distribution:
            declared.setdefault(ep.value, set()).add(ep.name)
    if any(name not in declared for name in enabled):
        return True
    provided = set().union(*declared.values())
    return any(kind.startswith("xcore.") or kind in provided for kind in kinds)


def scan(groups: set[str], path: list[str] | None = None) -> list[EntryPoint]:
    """Every entry point in ``groups``, first distribution (in ``sys.path`` order) first."""
    seen_dists: set[str] = set()
    result: list[EntryPoint] = []
    for directory in sys.path if path is None else path:
        try:
            entries = sorted(e for e in os.listdir(directory or ".") if e.endswith((".dist-info", ".egg-info")))
        except OSError:
            continue
        for entry in entries:
            key = entry.split("-", 1)[0].lower().replace("_", "-").replace(".", "-")
            if key in seen_dists:
                continue
            info_dir = os.path.join(directory or ".", entry)
            seen_dists.add(key)
            try:
                with open(os.path.join(info_dir, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            if not any(f"[{group}]" in text for group in groups):
                continue
            sections = _parse(text, groups)
            if not sections:
                continue
            dist, version = _name_and_version(info_dir, entry)
            for group, pairs in sections.items():
                result.extend(EntryPoint(name, value, group, dist, version) for name, value in pairs)
    return result
