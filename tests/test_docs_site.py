"""The documentation site (issue 32): ``mkdocs build --strict`` passes, and the check works: a
broken link or a broken anchor in a page fails the build. The references generated from the
code (every command's help, every hook specification) are on the built pages."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(300)


def build(tmp_path: Path, docs: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Build the site into tmp_path/site, from a copy of docs/ when given (mkdocs.yml otherwise as is)."""
    config = (REPO / "mkdocs.yml").read_text()
    config = config.replace("docs_dir: docs", f"docs_dir: {docs or REPO / 'docs'}")
    config = config.replace("site_dir: site", f"site_dir: {tmp_path / 'site'}")
    config = config.replace("- scripts/docs_hooks.py", f"- {REPO / 'scripts' / 'docs_hooks.py'}")
    (tmp_path / "mkdocs.yml").write_text(config)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
                          capture_output=True, text=True, env=env, timeout=240)


def test_the_site_builds_in_strict_mode_with_the_generated_references(tmp_path):
    result = build(tmp_path)
    assert result.returncode == 0, result.stderr
    site = tmp_path / "site"
    cli = (site / "cli" / "index.html").read_text()
    from xcore.cli.main import build_parser

    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for name in commands:
        assert f"xcore {name} --help" in cli, f"the command line page lacks `xcore {name}`"
    from xcore.hooks import specs

    hooks = (site / "hooks" / "index.html").read_text()
    for name in (n for n in vars(specs) if n.startswith("xcore_") and hasattr(getattr(specs, n), "xcore_spec")):
        assert f'id="{name}"' in hooks, f"the hooks reference lacks {name}"
    xhpc = (site / "backends" / "xhpc" / "index.html").read_text()
    assert "Files on the cluster" in xhpc  # the plugin's README, included


@pytest.mark.parametrize("broken", ["[the store](no-such-page.md)", "[the store](store.md#no-such-section)",
                                    "[a script](../scripts/no-such-script.sh)"],
                         ids=["link", "anchor", "repository-file"])
def test_a_broken_link_fails_the_strict_build(tmp_path, broken):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    page = docs / "concepts.md"
    page.write_text(page.read_text() + f"\nSee {broken}.\n")
    result = build(tmp_path, docs)
    assert result.returncode != 0, "a broken link passed the strict build"
    target = re.search(r"\((.*)\)", broken)[1]
    assert target.split("#")[-1] in result.stderr


def test_nothing_is_left_out_of_the_navigation():
    """Every page is in mkdocs.yml's nav (strict mode fails on an omitted page too)."""
    nav = (REPO / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert {p for p in pages if p not in nav} == set()


def test_links_to_repository_files_work_on_github_and_on_the_site(tmp_path):
    """A page may link to the README, a plugin's README or a script as GitHub shows them; the
    site sends such a link to the page that shows the file, or names the file."""
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    page = docs / "concepts.md"
    page.write_text(page.read_text() + "\nSee [the README](../README.md), [Slurm](../plugins/xhpc/README.md) and "
                    "[the test script](../scripts/test.sh).\n")
    result = build(tmp_path, docs)
    assert result.returncode == 0, result.stderr
    html = (tmp_path / "site" / "concepts" / "index.html").read_text()
    assert 'href="../backends/xhpc/"' in html and 'href="..' in html and "<code>scripts/test.sh</code>" in html
