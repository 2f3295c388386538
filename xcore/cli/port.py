"""``xcore port SCRIPT``: rewrite an XManager or lxm3 launch script's imports for xcore.

Uses a concrete syntax tree (libcst, ``pip install 'xcore[port]'``), so comments, blank
lines and formatting stay exactly as they were. Imports change: ``from xmanager import
xm`` becomes ``import xcore as xm`` and so on (the local names stay, so the rest of the script
is untouched). The one exception: ``xm_local``'s cloud executors live in other plugins, so
``xm_local.Vertex`` becomes ``xgcp.Vertex`` (and ``Kubernetes`` ``xk8s.Kubernetes``) where it
is used, with ``import xgcp`` added next to the ported import. Names used through those modules
that xcore lacks (``xm_local.Caip``) are listed, with the line, as not mapped. Of XManager's
helper modules, ``xmanager.contrib.tensorboard`` maps to ``xcore.contrib.tensorboard``; an import
of any other ``xmanager.contrib`` or ``xmanager.cloud`` module is listed with why xcore leaves it
out (``_ABSENT``).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import attrs

# (old module, name imported from it) -> (new module, name); name None: the module itself.
_MODULE_IMPORTS: dict[tuple[str, str], tuple[str, str | None]] = {
    ("xmanager", "xm"): ("xcore", None),
    ("xmanager", "xm_local"): ("xlocal", None),
    ("lxm3", "xm"): ("xcore", None),
    ("lxm3", "xm_cluster"): ("xhpc.xm_cluster", None),
    # lxm3's UCL presets: a stub whose UclGridEngine says what to write instead (see docs/porting.md)
    ("lxm3.contrib", "ucl"): ("xhpc.xm_cluster.ucl", None),
    ("xmanager.contrib", "tensorboard"): ("xcore.contrib.tensorboard", None),
}
# old module (from X import names) -> new module, names kept
_NAME_IMPORTS = {
    "xmanager.xm": "xcore",
    "xmanager.xm.utils": "xcore.model.utils",
    "xmanager.xm_local": "xlocal",
    "lxm3.xm": "xcore",
    "lxm3.xm_cluster": "xhpc.xm_cluster",
    "xmanager.contrib.tensorboard": "xcore.contrib.tensorboard",
}
# import X.Y as Z
_DOTTED_IMPORTS = {
    "xmanager.xm": "xcore",
    "xmanager.xm_local": "xlocal",
    "lxm3.xm": "xcore",
    "lxm3.xm_cluster": "xhpc.xm_cluster",
    "xmanager.contrib.tensorboard": "xcore.contrib.tensorboard",
}
# xm_local names that live in another plugin: name -> module (the name stays).
_MOVED = {
    "Vertex": "xgcp",
    "VertexSpec": "xgcp",
    "TensorboardCapability": "xgcp",
    "Kubernetes": "xk8s",
    "KubernetesSpec": "xk8s",
}
_WHY_UNMAPPED = {
    "xm_local.Caip": "CAIP (AI Platform Training) was replaced by Vertex AI: use xm_local.Vertex (xgcp.Vertex)",
    "xm_local.CaipSpec": "CAIP (AI Platform Training) was replaced by Vertex AI: use xm_local.Vertex.Spec()",
    "xm_local.TpuCapability": "xk8s takes TPUs from the requirements (xm.JobRequirements(tpu_v4='2x2x1')) "
                              "and the GKE node selectors it derives from them",
}
# XManager's helper modules that xcore leaves out on purpose, and why (docs/porting.md has the table)
_ABSENT = {
    "xmanager.contrib.xm_tensorflow": "its strategy builders make the JobGroup and TF_CONFIG; in xcore give the "
                                      "executor distributed=xm.Distributed('tf') and JobRequirements(replicas=N): "
                                      "every process gets TF_CONFIG (docs/gangs.md)",
    "xmanager.contrib.addressing": "XManager's Kubernetes pod DNS names; xk8s names pods its own way and gives "
                                   "each job of a JobGroup its peers' hosts in XCORE_JOB_HOSTS and "
                                   "XCORE_HOST_<ROLE> (docs/gangs.md)",
    "xmanager.contrib.parameter_controller": "runs a pickled function as a remote unit that talks to XManager's "
                                            "API server and database, which xcore has no counterpart of; "
                                            "write an async job generator, which xcore runs in the launcher",
    "xmanager.contrib.process_entry": "the entry point of parameter_controller's remote unit (absent: "
                                      "no XManager API server)",
    "xmanager.contrib.flow": "built on parameter_controller (absent: no XManager API server); order jobs in an "
                             "async job generator that awaits each unit (await unit.wait_until_complete())",
    "xmanager.contrib.copybara": "transforms source before a build, outside the launch API: run copybara "
                                 "before xcore launch",
    "xmanager.contrib.framework_defaults": "its base images are fixed 2021 gcr.io deep-learning images; "
                                          "name the base image (python_container(base_image=...))",
    "xmanager.contrib.gcs": "absl flags and string helpers for gs:// and Vertex's /gcs/ paths; write the "
                            "gs:// path (xgcp passes it through)",
    "xmanager.contrib.tpu": "Dockerfile lines that install a pinned libtpu on Vertex TPU VMs; use an image "
                            "with TPU support or give python_container(docker_instructions=...)",
    "xmanager.cloud.vertex": "XManager's Vertex client: xgcp.Vertex launches; create a TensorBoard instance with "
                             "`gcloud ai tensorboards create` and give its name to xgcp.TensorboardCapability",
    "xmanager.cloud.build_image": "xcore builds and pushes images when it packages xm.python_container or "
                                  "xm.dockerfile_container for the executor; give docker_instructions= instead",
    "xmanager.cloud.docker_lib": "xcore builds images itself when it packages them (xcore.images)",
    "xmanager.cloud.cloud_build": "xgcp builds and pushes images itself when it packages them",
    "xmanager.cloud.auth": "xgcp takes project, location and service account from a target in vertex.toml",
    "xmanager.cloud.kubernetes": "XManager's Kubernetes client: xk8s.Kubernetes launches",
    "xmanager.cloud.utils": "in-job helpers for Vertex worker pools (CLUSTER_SPEC, address placeholders that "
                            "build_image's entrypoint fills in): read CLUSTER_SPEC and XCORE_ROLE_POOLS, or use "
                            "distributed= where the backend has it (docs/gangs.md)",
}


def _why_absent(module: str) -> str | None:
    """Why ``module`` (or the package it is in) has no xcore equivalent, if that was decided."""
    while module:
        if module in _ABSENT:
            return f"deliberately absent: {_ABSENT[module]}"
        module = module.rpartition(".")[0]
    return None


# keywords of the moved executors that their xcore counterparts do not take, and why
_DROPPED_KEYWORDS = {
    ("Kubernetes", "cloud_provider"): "xk8s talks to whatever cluster the kubeconfig context names "
                                      "(xk8s.Kubernetes(context=...)); leave it out",
    ("Kubernetes", "tpu_capability"): "give TPUs in requirements (xm.JobRequirements(tpu_v4='2x2x1')); "
                                      "leave it out",
}


@attrs.frozen
class Change:
    line: int
    before: str
    after: str


@attrs.frozen
class Unmapped:
    line: int
    name: str
    reason: str


@attrs.define
class PortResult:
    source: str
    code: str
    changes: list[Change]
    unmapped: list[Unmapped]

    @property
    def changed(self) -> bool:
        return self.code != self.source

    def diff(self, path: str) -> str:
        return "".join(difflib.unified_diff(
            self.source.splitlines(keepends=True), self.code.splitlines(keepends=True),
            fromfile=f"{path} (before)", tofile=f"{path} (ported)"))


def _exports(module: str) -> set[str] | None:
    """Public names of a target module, or None if it cannot be imported here (then uses
    through it are not checked)."""
    import importlib

    try:
        imported = importlib.import_module(module)
    except ImportError:  # e.g. a plugin that is not installed
        return None
    names = set(getattr(imported, "__all__", None) or dir(imported))
    exports = getattr(imported, "_EXPORTS", None)
    return names | set(exports or ())


def _libcst() -> Any:
    try:
        import libcst
    except ImportError:
        from xcore.errors import ConfigurationError

        raise ConfigurationError(
            "`xcore port` needs libcst: pip install 'xcore[port]' (or pip install libcst)."
        ) from None
    return libcst


def port_source(source: str) -> PortResult:
    """Rewrite ``source``; nothing is written anywhere."""
    cst = _libcst()
    from libcst.metadata import MetadataWrapper, PositionProvider

    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module)
    changes: list[Change] = []
    unmapped: list[Unmapped] = []
    bound: dict[str, str] = {}  # local name -> new module it now refers to
    blank = cst.parse_module("")

    class Uses(cst.CSTVisitor):  # type: ignore[name-defined]  # libcst is imported lazily (Any)
        """``name.attr`` pairs used anywhere: which moved xm_local names a script needs."""

        def __init__(self) -> None:
            super().__init__()
            self.pairs: set[tuple[str, str]] = set()

        def visit_Attribute(self, node: Any) -> None:
            if isinstance(node.value, cst.Name):
                self.pairs.add((node.value.value, node.attr.value))

    uses = Uses()
    module.visit(uses)

    def moved_imports(alias: str) -> list[Any]:
        """``import xgcp`` / ``import xk8s`` for the moved names used through ``alias``."""
        targets = sorted({_MOVED[attr] for name, attr in uses.pairs if name == alias and attr in _MOVED})
        return [cst.parse_statement(f"import {target}").body[0] for target in targets]

    def dotted(node: Any) -> str:
        if node is None:
            return ""
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            return f"{dotted(node.value)}.{node.attr.value}"
        return blank.code_for_node(node)

    def import_stmt(target: str, asname: str) -> Any:
        if "." in target:
            package, name = target.rsplit(".", 1)
            text = f"from {package} import {name}" + (f" as {asname}" if asname != name else "")
        else:
            text = f"import {target}" + (f" as {asname}" if asname != target else "")
        return cst.parse_statement(text).body[0]

    class Porter(cst.CSTTransformer):  # type: ignore[name-defined]  # libcst is imported lazily (Any)
        METADATA_DEPENDENCIES = (PositionProvider,)

        current_line = 0

        def _line(self, node: Any) -> int:
            return self.current_line  # metadata is keyed by original nodes; set per statement line

        def leave_SimpleStatementLine(self, original: Any, updated: Any) -> Any:
            self.current_line = self.get_metadata(PositionProvider, original).start.line
            new_body: list[Any] = []
            touched = False
            for small in updated.body:
                replacement = self._port(small)
                if replacement is None:
                    new_body.append(small)
                else:
                    touched = True
                    new_body.extend(replacement)
            if not touched:
                return updated
            line = self.current_line
            lines = []
            for index, statement in enumerate(new_body):
                trailing = updated.trailing_whitespace if index == len(new_body) - 1 else cst.TrailingWhitespace()
                lines.append(cst.SimpleStatementLine(
                    body=[statement.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)],
                    leading_lines=updated.leading_lines if index == 0 else [],
                    trailing_whitespace=trailing,
                ))
            changes.append(Change(line, blank.code_for_node(original).strip(),
                                  "\n".join(blank.code_for_node(s).strip() for s in lines)))
            return cst.FlattenSentinel(lines)

        def leave_Attribute(self, original: Any, updated: Any) -> Any:
            value = updated.value
            if (isinstance(value, cst.Name) and bound.get(value.value) == "xlocal"
                    and updated.attr.value in _MOVED):
                target = _MOVED[updated.attr.value]
                line = self.get_metadata(PositionProvider, original).start.line
                changes.append(Change(line, f"{value.value}.{updated.attr.value}", f"{target}.{updated.attr.value}"))
                return updated.with_changes(value=cst.Name(target))
            return updated

        def _port(self, small: Any) -> list[Any] | None:
            if isinstance(small, cst.ImportFrom) and not small.relative:
                return self._port_from(small)
            if isinstance(small, cst.Import):
                return self._port_import(small)
            return None

        def _port_from(self, node: Any) -> list[Any] | None:
            source_module = dotted(node.module)
            if isinstance(node.names, cst.ImportStar):
                target = _NAME_IMPORTS.get(source_module)
                if target is None:
                    return None
                return [cst.parse_statement(f"from {target} import *").body[0]]
            if source_module in _NAME_IMPORTS:  # same names, new module: keep the statement's layout
                target = _NAME_IMPORTS[source_module]
                moved: dict[str, list[Any]] = {}
                if target == "xlocal":  # names that live in another plugin get their own import
                    for alias in node.names:
                        if dotted(alias.name) in _MOVED:
                            moved.setdefault(_MOVED[dotted(alias.name)], []).append(
                                alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))
                if moved:
                    kept_names = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in node.names
                                  if dotted(a.name) not in _MOVED]
                    statements = [node.with_changes(module=cst.parse_expression(target), names=kept_names,
                                                    lpar=None, rpar=None)] if kept_names else []
                    statements += [cst.ImportFrom(module=cst.parse_expression(m), names=aliases)
                                   for m, aliases in sorted(moved.items())]
                    return statements
                names = _exports(target)
                for alias in node.names:
                    name = dotted(alias.name)
                    if names is not None and name not in names:
                        why = _WHY_UNMAPPED.get(f"{source_module.rsplit('.', 1)[-1]}.{name}", f"{target} has no {name}")
                        unmapped.append(Unmapped(self._line(node), f"{source_module}.{name}", why))
                return [node.with_changes(module=cst.parse_expression(target))]
            out: list[Any] = []
            kept: list[Any] = []
            hit = False
            for alias in node.names:
                name = dotted(alias.name)
                asname = alias.asname.name.value if alias.asname else name
                if (source_module, name) in _MODULE_IMPORTS:
                    target, _ = _MODULE_IMPORTS[(source_module, name)]
                    out.append(import_stmt(target, asname))
                    if target == "xlocal":
                        out.extend(moved_imports(asname))
                    bound[asname] = target
                    hit = True
                elif source_module.split(".")[0] in ("xmanager", "lxm3"):
                    unmapped.append(Unmapped(self._line(node), f"{source_module}.{name}",
                                             _why_absent(f"{source_module}.{name}")
                                             or "no xcore equivalent; port this by hand"))
                    kept.append(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))
                else:
                    kept.append(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))
            if not hit:
                return None
            if kept:
                out.insert(0, node.with_changes(names=kept))
            return out

        def _port_import(self, node: Any) -> list[Any] | None:
            out: list[Any] = []
            kept: list[Any] = []
            hit = False
            for alias in node.names:
                name = dotted(alias.name)
                if name in _DOTTED_IMPORTS and alias.asname is not None:
                    asname = alias.asname.name.value
                    out.append(import_stmt(_DOTTED_IMPORTS[name], asname))
                    if _DOTTED_IMPORTS[name] == "xlocal":
                        out.extend(moved_imports(asname))
                    bound[asname] = _DOTTED_IMPORTS[name]
                    hit = True
                else:
                    if name.split(".")[0] in ("xmanager", "lxm3"):
                        unmapped.append(Unmapped(self._line(node), name, _why_absent(name) or
                                                 "import it as a module alias (from xmanager import xm) to port it"))
                    kept.append(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))
            if not hit:
                return None
            if kept:
                out.insert(0, node.with_changes(names=kept))
            return out

    class UseChecker(cst.CSTVisitor):  # type: ignore[name-defined]  # libcst is imported lazily (Any)
        METADATA_DEPENDENCIES = (PositionProvider,)

        def visit_Attribute(self, node: Any) -> None:
            if isinstance(node.value, cst.Name) and node.value.value in bound:
                target = bound[node.value.value]
                names = _exports(target)
                attr = node.attr.value
                if target == "xlocal" and attr in _MOVED:
                    return
                if names is not None and attr not in names:
                    key = f"{target.rsplit('.', 1)[-1] if target != 'xlocal' else 'xm_local'}.{attr}"
                    line = self.get_metadata(PositionProvider, node).start.line
                    unmapped.append(Unmapped(line, f"{node.value.value}.{attr}",
                                             _WHY_UNMAPPED.get(key, f"{target} has no {attr}")))

        def visit_Call(self, node: Any) -> None:
            func = node.func
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                    and bound.get(func.value.value) == "xlocal"):
                return
            for arg in node.args:
                why = _DROPPED_KEYWORDS.get((func.attr.value, arg.keyword.value if arg.keyword else ""))
                if why:
                    line = self.get_metadata(PositionProvider, arg).start.line
                    unmapped.append(Unmapped(line, f"{func.value.value}.{func.attr.value}({arg.keyword.value}=...)",
                                             why))

    ported = wrapper.visit(Porter())
    wrapper.visit(UseChecker())  # on the original, so lines are the script's own
    seen: set[tuple[int, str]] = set()
    unique = [u for u in sorted(unmapped, key=lambda u: (u.line, u.name))
              if (u.line, u.name) not in seen and not seen.add((u.line, u.name))]  # type: ignore[func-returns-value]
    return PortResult(source, ported.code, changes, unique)


def report(result: PortResult, path: str) -> list[str]:
    lines = [f"{path}:{c.line}: {c.before}  ->  {' ; '.join(c.after.splitlines())}" for c in result.changes]
    lines += [f"{path}:{u.line}: not mapped: {u.name} ({u.reason})" for u in result.unmapped]
    if not result.changes and not result.unmapped:
        lines.append(f"{path}: nothing to port (no xmanager or lxm3 imports)")
    return lines


def run(script: str, write: bool, output: str | None, quiet_diff: bool = False) -> tuple[PortResult, Sequence[str]]:
    """Port ``script``; write it back only with ``write`` (or to ``output``)."""
    from pathlib import Path

    path = Path(script)
    source = path.read_text(encoding="utf-8")
    result = port_source(source)
    if output:
        Path(output).write_text(result.code, encoding="utf-8")
    elif write and result.changed:
        path.write_text(result.code, encoding="utf-8")
    return result, report(result, script)


def command(args: Any) -> int:
    """``xcore port SCRIPT [--write | -o OUT]``."""
    import sys
    from pathlib import Path

    from xcore.errors import ConfigurationError

    if not Path(args.script).is_file():
        raise ConfigurationError(f"{args.script}: no such file.")
    if args.write and args.output:
        raise ConfigurationError("Give --write or --output, not both.")
    try:
        result, lines = run(args.script, args.write, args.output)
    except Exception as error:  # libcst's parse errors name the line
        if type(error).__name__ == "ParserSyntaxError":
            raise ConfigurationError(f"{args.script} is not valid Python: {error}") from None
        raise
    if not args.write and not args.output:
        sys.stdout.write(result.diff(args.script))
    for line in lines:
        print(line, file=sys.stderr)
    where = "rewritten in place" if args.write and result.changed else f"written to {args.output}" if args.output else (
        "not changed on disk (use --write)" if result.changed else "unchanged")
    print(f"{args.script}: {len(result.changes)} change(s), {len(result.unmapped)} name(s) not mapped; {where}.",
          file=sys.stderr)
    return 1 if result.unmapped else 0
