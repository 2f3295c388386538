"""The core is built in floors (issue 25; drawn in docs/life-of-a-job.md): each module imports
only from its own floor or the floors below, no two modules import each other (directly or
round a circle), and no two subpackages import each other. Every import counts, also those
inside functions and under ``TYPE_CHECKING``: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

XCORE = Path(__file__).resolve().parent.parent / "xcore"

# Bottom to top. A name is a subpackage or a top-level module of xcore ("__init__" is the
# package's own face, ``import xcore``). What shares a floor may import each other one way.
FLOORS: list[set[str]] = [
    {"errors", "lazy", "paths", "settings", "progress"},  # the basement, shared by every floor
    {"model"},                                # the job model: what a job is, as data
    {"plumbing", "store", "trackers"},        # backend helpers, the metadata store, tracker data
    {"hooks"},                                # the plugin host and the hook contract
    {"runtime", "plugin"},                    # what runs after add; the plugin authors' face
    {"workspace"},                            # settings, plugin host and store of one session; its read model
    {"images", "launch"},                     # the container image builder; the launch API
    {"__init__"},                             # ``import xcore``: the launch API's names
    {"contrib"},                              # helpers built on the launch API (xmanager.contrib's)
    {"cli", "ui"},                            # the command line and the dashboard
    {"testing"},                              # the plugin and store authors' test kit
]
FLOOR_OF = {name: level for level, names in enumerate(FLOORS) for name in names}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in XCORE.rglob("*.py"):
        parts = list(path.relative_to(XCORE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """The xcore modules ``module`` imports, by their full names."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # `from xcore.model import status` imports the module xcore.model.status
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("xcore") and name != module:
                found.add(name)
    return found


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_room_is_on_a_floor():
    rooms = {_room(module) for module in MODULES}
    assert rooms - FLOOR_OF.keys() == set(), "put a new module in a package of its floor, or add it to FLOORS"


def test_no_module_imports_from_a_floor_above_it():
    offenders = [
        f"{module} -> {target}"
        for module, targets in sorted(GRAPH.items())
        for target in sorted(targets)
        if FLOOR_OF[_room(target)] > FLOOR_OF[_room(module)]
    ]
    assert offenders == []


def test_no_two_subpackages_import_each_other():
    edges = {(_room(a), _room(b)) for a, targets in GRAPH.items() for b in targets if _room(a) != _room(b)}
    assert sorted((a, b) for a, b in edges if (b, a) in edges and a < b) == []


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    circles.append(sorted(group))
    return circles


def test_no_module_cycles():
    assert _circles(GRAPH) == []


def test_the_cycle_finder_finds_a_circle():
    graph: dict[str, set[str]] = defaultdict(set, {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert _circles(graph) == [["a", "b", "c"]]


def test_every_package_says_what_it_is_for():
    for init in XCORE.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init.relative_to(XCORE.parent)} needs a docstring"


def test_the_model_imports_nothing_above_the_basement():
    above = {module: sorted(t for t in targets if FLOOR_OF[_room(t)] > 0 and _room(t) != "model")
             for module, targets in GRAPH.items() if _room(module) == "model"}
    assert {m: t for m, t in above.items() if t} == {}
