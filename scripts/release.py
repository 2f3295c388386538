"""Build every distribution in this repository into one wheelhouse and check what was built.

    python scripts/release.py dist                      # wheels and sdists of all four, checked
    python scripts/release.py --wheel-only --no-isolation WHEELHOUSE xcore-core xcore-xhpc

`nox -s build` and tests/test_release.py both use it, so what CI installs is what a release
would upload. The checks catch what a packaging mistake looks like from the user's side: a
version that differs from the one the code reports, a plugin not bounded to the core's range
(or still naming the core's old distribution, `xcore`, an unrelated project on PyPI), a
missing entry point, or stray top-level packages (tests, examples) shipped in a wheel.
"""

from __future__ import annotations

import argparse
import ast
import email
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORE = "xcore-core"


@dataclass(frozen=True)
class Distribution:
    name: str  # on PyPI
    path: str  # project directory, relative to the repository root
    package: str  # the import package it ships
    entry_point: str  # "group:name" that must be declared

    @property
    def version(self) -> str:
        """The ``__version__`` literal in the package, the one place each version is written."""
        source = REPO / self.path / self.package / "__init__.py"
        for node in ast.parse(source.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
                return ast.literal_eval(node.value)
        raise SystemExit(f"{source} has no `__version__ = \"X.Y.Z\"` line; the build reads the version from it")


DISTRIBUTIONS = {
    d.name: d
    for d in (
        Distribution(CORE, ".", "xcore", "console_scripts:xcore"),
        Distribution("xcore-xlocal", "plugins/xlocal", "xlocal", "xcore:xlocal"),
        Distribution("xcore-xhpc", "plugins/xhpc", "xhpc", "xcore:xhpc"),
        Distribution("xcore-xgcp", "plugins/xgcp", "xgcp", "xcore:xgcp"),
        Distribution("xcore-xk8s", "plugins/xk8s", "xk8s", "xcore:xk8s"),
        Distribution("xcore-inline", "examples/plugins/xcore-inline", "xinline", "xcore:inline"),
    )
}


def build(dists: list[Distribution], outdir: Path, *, sdist: bool = True, isolation: bool = True) -> None:
    """With ``sdist``, the wheel is built from the sdist, which proves the sdist complete."""
    for dist in dists:
        project = REPO / dist.path
        argv = [sys.executable, "-m", "build", "--outdir", str(outdir)]
        if not sdist:
            argv.append("--wheel")
            # A wheel built in the tree packs whatever build/lib holds, modules deleted since included.
            shutil.rmtree(project / "build", ignore_errors=True)
        if not isolation:
            argv.append("--no-isolation")
        result = subprocess.run([*argv, str(project)], capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"building {dist.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


def _one(outdir: Path, pattern: str) -> Path:
    found = sorted(outdir.glob(pattern))
    if len(found) != 1:
        raise AssertionError(f"expected one {pattern} in {outdir}, found {[p.name for p in found] or 'none'}")
    return found[0]


def check(dists: list[Distribution], outdir: Path, *, sdist: bool = True) -> list[str]:
    """Every problem found with the built files, one line each; empty when all is well."""
    from packaging.requirements import Requirement  # a dependency of `build`

    problems: list[str] = []
    core_version = DISTRIBUTIONS[CORE].version
    for dist in dists:
        stem = f"{dist.name.replace('-', '_')}-{dist.version}"
        try:
            wheel = _one(outdir, f"{stem}-py3-none-any.whl")
            if sdist:
                _one(outdir, f"{stem}.tar.gz")
        except AssertionError as error:
            problems.append(f"{dist.name}: {error}")
            continue
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            meta = email.message_from_bytes(archive.read(f"{stem}.dist-info/METADATA"))
            entry_points = archive.read(f"{stem}.dist-info/entry_points.txt").decode()
        if (meta["Name"], meta["Version"]) != (dist.name, dist.version):
            problems.append(f"{wheel.name}: metadata says {meta['Name']} {meta['Version']}, "
                            f"{dist.package}.__version__ says {dist.version}")
        top = {n.split("/", 1)[0] for n in names} - {f"{stem}.dist-info"}
        if top != {dist.package}:
            problems.append(f"{wheel.name}: ships {sorted(top)}, expected only {dist.package}/")
        group, name = dist.entry_point.split(":")
        if f"[{group}]" not in entry_points or f"\n{name} = " not in entry_points:
            problems.append(f"{wheel.name}: no entry point {name!r} in group {group!r}")
        requires = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
        if any(r.name == "xcore" for r in requires):
            problems.append(f"{wheel.name}: depends on 'xcore', an unrelated PyPI project; the core is {CORE!r}")
        if dist.name != CORE:
            cores = [r for r in requires if r.name == CORE]
            if len(cores) != 1 or not cores[0].specifier.contains(core_version) \
                    or not any(s.operator == "<" for s in cores[0].specifier):
                problems.append(f"{wheel.name}: needs one bounded {CORE} requirement admitting {core_version} "
                                f"(like {CORE}>=0.1,<0.2), has {[str(r) for r in cores]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path, help="the wheelhouse directory (created if missing)")
    parser.add_argument("names", nargs="*", metavar="DIST",
                        help=f"distributions (default: all of {', '.join(DISTRIBUTIONS)})")
    parser.add_argument("--wheel-only", action="store_true", help="skip the sdists")
    parser.add_argument("--no-isolation", action="store_true",
                        help="build with this interpreter's setuptools instead of a fresh build env (faster, offline)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in DISTRIBUTIONS]
    if unknown:
        parser.error(f"unknown distribution {unknown[0]!r}; choose from {', '.join(DISTRIBUTIONS)}")
    dists = [DISTRIBUTIONS[n] for n in args.names or DISTRIBUTIONS]
    args.outdir.mkdir(parents=True, exist_ok=True)
    build(dists, args.outdir, sdist=not args.wheel_only, isolation=not args.no_isolation)
    problems = check(dists, args.outdir, sdist=not args.wheel_only)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print(f"built and checked {', '.join(f'{d.name} {d.version}' for d in dists)} in {args.outdir}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
