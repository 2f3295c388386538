"""The documentation cannot lie (issue 32): the site builds in strict mode, a broken link or
anchor fails that build, and every code block marked runnable runs as written.

A block is runnable when the line before its fence is ``<!-- runnable -->`` (invisible on
GitHub and on the site). Two kinds, parsed and run with Sybil, which reads Markdown, keeps a
namespace per document and reports failures at the block's line:

- ``python``: a launch script. It is saved as ``launch.py`` in the document's own directory
  (which holds a copy of ``examples/``, as a checkout does) and run with ``xcore launch --wait``;
  it must exit 0.
- ``console``: lines starting with ``$ `` are commands, run there in order; the lines after
  each are its expected standard output, where ``...`` matches anything and runs of spaces
  match any spacing (doctest's ELLIPSIS and NORMALIZE_WHITESPACE).

All blocks of one document share one ``XCORE_HOME``, so a page reads like one session.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sybil import Document, Region, Sybil

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(?P<lang>python|console)\n(?P<source>.*?)^```$",
                      re.MULTILINE | re.DOTALL)
DOCUMENTS = ["README.md", "docs/*.md", "docs/*/*.md"]
# Pages that must keep runnable blocks (a marker lost by an edit would silently test nothing).
MUST_RUN = {"README.md": 1, "docs/getting-started.md": 4, "docs/writing-a-plugin.md": 1}
CHECK = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

pytestmark = pytest.mark.timeout(300)


def runnable_blocks(document: Document):
    """Sybil parser: a region per marked block, evaluated by its language's evaluator."""
    for match in RUNNABLE.finditer(document.text):
        evaluator = run_launch_script if match["lang"] == "python" else run_console_session
        yield Region(match.start(), match.end(), match["source"], evaluator)


def run_launch_script(example) -> None:
    where: Path = example.namespace["dir"]
    (where / "launch.py").write_text(example.parsed)
    result = _run(["xcore", "launch", "--wait", "launch.py"], where, example.namespace["env"])
    assert result.returncode == 0, f"line {example.line}: the launch script failed:\n{result.stdout}{result.stderr}"


def run_console_session(example) -> None:
    for command, expected in _commands(example.parsed):
        result = _run(shlex.split(command), example.namespace["dir"], example.namespace["env"])
        assert result.returncode == 0, f"line {example.line}: `{command}` exited {result.returncode}:\n{result.stderr}"
        got = "\n".join(line.rstrip() for line in result.stdout.splitlines()) + "\n"
        assert CHECK.check_output(expected, got, FLAGS), (
            f"line {example.line}: `{command}` printed\n{got}\nbut the documentation says\n{expected}")


def _commands(session: str) -> list[tuple[str, str]]:
    commands: list[tuple[str, list[str]]] = []
    for line in session.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
        else:
            raise ValueError(f"a console block must start with a `$ ` command line, not {line!r}")
    return [(command, "".join(f"{line}\n" for line in output)) for command, output in commands]


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    program = shutil.which(argv[0], path=env["PATH"])
    assert program, f"`{argv[0]}` is not installed"
    return subprocess.run([program, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


SYBIL = Sybil(parsers=[runnable_blocks], path=str(REPO), patterns=DOCUMENTS)


def documents_with_runnable_blocks() -> list[str]:
    found = set()
    for pattern in DOCUMENTS:
        found |= {str(p.relative_to(REPO)) for p in REPO.glob(pattern) if RUNNABLE.search(p.read_text())}
    return sorted(found | set(MUST_RUN))


@pytest.mark.parametrize("name", documents_with_runnable_blocks())
def test_runnable_blocks_run_as_written(name, tmp_path):
    document = SYBIL.parse(REPO / name)
    examples = list(document.examples())
    assert len(examples) >= MUST_RUN.get(name, 1), f"{name} lost its runnable blocks (<!-- runnable --> markers)"
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "XCORE_HOME": str(tmp_path / "home"), "XCORE_QUIET": "1",
           "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("XCORE_STORE", None)
    document.namespace.update(dir=tmp_path, env=env)
    for example in examples:
        example.evaluate()


def test_a_console_block_that_differs_from_the_output_fails(tmp_path):
    """The check itself: a documented output that is not what the command prints fails."""
    page = tmp_path / "page.md"
    page.write_text("<!-- runnable -->\n```console\n$ xcore list\nno experiments here, says the page\n```\n")
    [example] = Sybil(parsers=[runnable_blocks], path=str(tmp_path), patterns=["*.md"]).parse(page).examples()
    example.namespace.update(dir=tmp_path, env={**os.environ, "XCORE_HOME": str(tmp_path / "home"),
                                                "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"})
    with pytest.raises(AssertionError, match="but the documentation says"):
        example.evaluate()


EXAMPLE_FOLDERS = sorted([*(REPO / "examples").iterdir(), *(REPO / "plugins").glob("*/examples")])


@pytest.mark.parametrize("folder", [p for p in EXAMPLE_FOLDERS if p.is_dir()], ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_has_a_readme_naming_the_tests_that_run_it(folder):
    """Each example says in a few lines what it is and which tests run it in CI, and those
    tests exist and name the example."""
    readme = folder / "README.md"
    assert readme.is_file(), f"{folder.relative_to(REPO)} has no README.md"
    text = readme.read_text()
    assert len(text.splitlines()) <= 15, f"{readme.relative_to(REPO)}: a few lines, the manual lives in docs/"
    runs_in = text.partition("Runs in CI")[2]
    tests = re.findall(r"`([\w/.-]+\.py)`", runs_in)
    assert tests, f"{readme.relative_to(REPO)} names no test that runs it ('Runs in CI: `path`')"
    for test in tests:
        assert (REPO / test).is_file(), f"{readme.relative_to(REPO)} names {test}, which does not exist"
    named = "".join((REPO / t).read_text() for t in tests)
    assert folder.name in named or "examples" in named, f"none of {tests} runs {folder.relative_to(REPO)}"


def test_every_test_the_reliability_page_cites_exists():
    """docs/reliability.md names, for each guarantee, the test that shows it: each must exist."""
    page = (REPO / "docs" / "reliability.md").read_text()
    cited = set(re.findall(r"`((?:tests|plugins/\w+/tests)/[\w/]+\.py)(?:::(\w+))?`", page))
    assert len(cited) >= 20
    for path, name in cited:
        assert (REPO / path).is_file(), f"docs/reliability.md cites {path}, which does not exist"
        if name:
            assert f"def {name}(" in (REPO / path).read_text(), f"docs/reliability.md cites {path}::{name}"


def test_the_readme_is_a_five_minute_read_with_the_two_commands():
    """At most 150 lines: what xcore is, every distribution, the quick start and test commands
    (.ci/run runs the latter), a launch script, and links to the documentation."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "```sh\nbash scripts/quickstart.sh\n```" in readme and "```sh\nbash scripts/test.sh\n```" in readme
    for dist in ("xcore-core", "xcore-xlocal", "xcore-xhpc", "xcore-xk8s", "xcore-xgcp"):
        assert f"| `{dist}` |" in readme
    for link in re.findall(r"\]\(((?:docs|plugins)/[^)#]+)", readme):
        assert (REPO / link).is_file(), f"README links to {link}, which does not exist"
