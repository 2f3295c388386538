"""Developer sessions: `nox -s tests`, `nox -s lint`, `nox -s bench`.

CI and the README use scripts/test.sh, which also starts the real services; these sessions
are for working on one part quickly.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests"]
PLUGINS = ["plugins/xlocal[docker]", "plugins/xhpc"]


@nox.session(python=["3.11", "3.12", "3.13"])
def tests(session: nox.Session) -> None:
    """The test suite; set XCORE_REQUIRE_INFRA=1 to fail instead of skip when a service is missing."""
    session.install("-e", ".[test]", *[arg for p in PLUGINS for arg in ("-e", p)], "pytest-timeout")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff", "mypy", "-e", ".", "-e", "plugins/xlocal")
    session.run("ruff", "check", "xcore", "plugins")
    session.run("mypy", "xcore")


@nox.session
def bench(session: nox.Session) -> None:
    """Every benchmark under bench/, each printing its figures."""
    session.install("-e", ".", *[arg for p in PLUGINS for arg in ("-e", p)])
    for script in sorted(__import__("pathlib").Path("bench").glob("bench_*.py")):
        session.run("python", str(script))
