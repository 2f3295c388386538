"""Developer sessions, one per habit: tests per distribution, lint, typecheck, build, bench.

    nox -l                           # list them
    nox -s "tests-3.11(xhpc)"        # one distribution's tests on one Python
    nox -s lint typecheck build
    nox -s docs                      # build the documentation site strictly, then serve it

CI and the README use scripts/test.sh, which also starts the real services; these sessions are
for working on one part quickly. Set XCORE_REQUIRE_INFRA=1 to make tests that need a missing
service fail instead of skip. Tool versions are pinned so every machine reports the same findings.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint", "typecheck", "build"]
nox.options.reuse_existing_virtualenvs = True

PYTHONS = ["3.11", "3.12", "3.13"]
LINT_TOOLS = ["-r", "scripts/lint-tools.txt"]  # the pinned ruff and mypy, shared with scripts/test.sh
BUILD_TOOLS = ["build==1.6.1", "twine==7.0.0", "check-wheel-contents==0.6.3"]
WHEELHOUSE = "dist"

# What each distribution's test session installs (editable) and runs: the distribution, its
# test extras, and what its tests need besides. The core's tests run on the fake backend
# (xcore.testing.fake) and install the example plugin themselves (pip --target); the plugins
# in CORE_ALLOWED_PLUGINS serve only the modules allow-listed in tests/test_test_layers.py (the
# plugin host listing every first-party plugin, the CLI tests launching on xlocal, the
# contract suites run on xlocal and xhpc): shrink it with that list.
CORE_ALLOWED_PLUGINS = ["-e", "plugins/xlocal[docker]", "-e", "plugins/xhpc", "-e", "plugins/xgcp",
                        "-e", "plugins/xk8s"]
TESTS = {
    "core": (["-e", ".[test,postgres,ui,docs]", *CORE_ALLOWED_PLUGINS], "tests"),  # docs: tests/test_docs*.py
    # xlocal's end-to-end tests run on both stores (PostgreSQL when the server is up).
    "xlocal": (["-e", ".[test,postgres]", "-e", "plugins/xlocal[docker]"], "plugins/xlocal/tests"),
    # xhpc's xm_cluster offers xlocal's Local (lxm3's API), so its tests need xlocal too.
    "xhpc": (["-e", ".[test]", "-e", "plugins/xhpc[lxm3]", "-e", "plugins/xlocal"], "plugins/xhpc/tests"),
    # Their image tests build and push with xcore.images (the docker SDK: the images extra); their
    # port tests run ported XManager launchers, which import xm_local's successor, xlocal.
    "xk8s": (["-e", ".[test]", "-e", "plugins/xk8s[test,images]", "-e", "plugins/xlocal"], "plugins/xk8s/tests"),
    "xgcp": (["-e", ".[test]", "-e", "plugins/xgcp[test,images]", "-e", "plugins/xlocal"], "plugins/xgcp/tests"),
}
# Every distribution at once, as scripts/test.sh installs them: for the type check and the benchmarks.
EVERYTHING = ["-e", ".[test,postgres,ui]", "-e", "plugins/xlocal[docker]", "-e", "plugins/xhpc[lxm3]",
              "-e", "plugins/xgcp", "-e", "plugins/xk8s[test]"]


@nox.session(python=PYTHONS)
@nox.parametrize("dist", list(TESTS), ids=list(TESTS))
def tests(session: nox.Session, dist: str) -> None:
    """One distribution's test suite; arguments go to pytest (`-- -x -k store`, `-- tests/test_cli.py`)."""
    packages, path = TESTS[dist]
    session.install(*packages, "pytest-timeout")
    names_tests = any(Path(arg.split("::")[0]).exists() for arg in session.posargs)
    session.run("pytest", "--timeout=600", *([] if names_tests else [path]), *session.posargs)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff over the whole repository, then the type check."""
    session.install(*LINT_TOOLS)
    session.run("ruff", "check", ".", *session.posargs)
    _mypy(session)


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    """mypy over the core and every plugin (config: [tool.mypy] in pyproject.toml)."""
    _mypy(session)


def _mypy(session: nox.Session) -> None:
    session.install(*LINT_TOOLS, *EVERYTHING)
    session.run("mypy")


@nox.session(python="3.11")
def build(session: nox.Session) -> None:
    """Wheel and sdist of every distribution into dist/, checked the way PyPI and pip read them."""
    session.install(*BUILD_TOOLS)
    shutil.rmtree(WHEELHOUSE, ignore_errors=True)
    session.run("python", "scripts/release.py", WHEELHOUSE)
    built = sorted(str(p) for p in Path(WHEELHOUSE).iterdir())
    session.run("twine", "check", "--strict", *built)
    session.run("check-wheel-contents", *[p for p in built if p.endswith(".whl")])


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Every benchmark under bench/, each printing its figures."""
    session.install(*EVERYTHING)
    for script in sorted(Path("bench").glob("bench_*.py")):
        session.run("python", str(script))


@nox.session(python="3.11")
def docs(session: nox.Session) -> None:
    """The documentation site: a strict build (a broken link fails), then served at 127.0.0.1:8000
    (`nox -s docs -- --no-serve` only builds). Every distribution is installed: the command line
    page lists the plugins' commands too."""
    session.install("-e", ".[docs]", "-e", "plugins/xlocal", "-e", "plugins/xhpc", "-e", "plugins/xgcp",
                    "-e", "plugins/xk8s")
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})
    if "--no-serve" not in session.posargs:
        session.run("mkdocs", "serve", "--dev-addr", "127.0.0.1:8000", env={"NO_MKDOCS_2_WARNING": "1"})
