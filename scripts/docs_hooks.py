"""MkDocs hooks (mkdocs.yml `hooks:`): the parts of the site generated from the code at build time.

Three markers in a page's Markdown are replaced, so nothing the site shows is a second copy:

- `<!-- xcore:include PATH [from=TEXT] -->`: a file of the repository (a plugin's README, the
  changelog), from its first line containing TEXT if given.

Relative links, in pages and included files alike, are rewritten for the site, which serves
only docs/: a link to a file that a page shows (README.md, a plugin's README, CHANGELOG.md) goes
to that page, a link to another file of the repository names it as code, and a link to nothing
is left for MkDocs's strict build to report.
- `<!-- xcore:cli-help -->`: `xcore COMMAND --help` of every command, from the argument parser
  (xcore/cli/main.py), plugins' commands included.
- `<!-- xcore:hooks -->`: every hook specification of xcore/hooks/specs.py with its signature
  and docstring.
"""

from __future__ import annotations

import argparse
import inspect
import os
import posixpath
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
INCLUDE = re.compile(r"<!-- xcore:include (?P<path>\S+)(?: from=(?P<start>.+?))? -->")
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)\)")
# Files outside docs/ that the site shows as a page of its own.
PAGES = {"README.md": "index.md", "CHANGELOG.md": "changelog.md", "bench/README.md": "performance.md",
         **{f"plugins/{p}/README.md": f"backends/{p}.md" for p in ("xlocal", "xhpc", "xk8s", "xgcp")}}
HELP_WIDTH = "100"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs calls this for every page before rendering it."""
    page_path = page.file.src_uri
    markdown = INCLUDE.sub(lambda m: include(m["path"], m["start"], page_path), markdown)
    # A page's own links to the README, a plugin's README or another repository file work on
    # GitHub; on the site they go to the page that shows that file, or name the file.
    markdown = rewrite_links(markdown, posixpath.join("docs", posixpath.dirname(page_path)), page_path)
    if "<!-- xcore:cli-help -->" in markdown:
        markdown = markdown.replace("<!-- xcore:cli-help -->", cli_help())
    if "<!-- xcore:hooks -->" in markdown:
        markdown = markdown.replace("<!-- xcore:hooks -->", hooks_reference())
    return markdown


def include(path: str, start: str | None, page_path: str) -> str:
    source = REPO / path
    if not source.is_file():
        raise FileNotFoundError(f"docs page {page_path} includes {path}, which does not exist")
    text = source.read_text()
    if start:
        at = text.find(start)
        if at < 0:
            raise ValueError(f"docs page {page_path}: {path} has no line containing {start!r}")
        text = text[text.rfind("\n", 0, at) + 1:]
    return rewrite_links(text, posixpath.dirname(path), page_path)


def rewrite_links(text: str, source_dir: str, page_path: str) -> str:
    """Point an included file's relative links at the site's pages, or name the file as code."""
    page_dir = posixpath.dirname(page_path)

    def rewrite(m: re.Match[str]) -> str:
        target = m["target"]
        if re.match(r"[a-z][a-z0-9+.-]*:|#", target):  # a URL, or an anchor in the same file
            return m[0]
        file, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(source_dir, file))
        if repo_path.startswith("docs/"):
            doc = repo_path.removeprefix("docs/")
        elif repo_path in PAGES:
            doc = PAGES[repo_path]
        elif (REPO / repo_path).exists():
            return f"{m['text']} (`{repo_path}`)" if m["text"] and not m["bang"] else f"`{repo_path}`"
        else:
            return m[0]  # left for MkDocs to report as broken
        new = posixpath.relpath(doc, page_dir or ".") + (f"#{anchor}" if anchor else "")
        return f"{m['bang']}[{m['text']}]({new})"

    return LINK.sub(rewrite, text)


def cli_help() -> str:
    """`xcore ... --help` for every command and subcommand, in the parser's order."""
    from xcore.cli.main import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH  # the formatter reads it: the same width on every machine
    try:
        parser = build_parser()
        sections: list[str] = []
        _walk(parser, ["xcore"], sections)
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(sections)


def _walk(parser: argparse.ArgumentParser, words: list[str], sections: list[str]) -> None:
    depth = "#" * min(len(words) + 1, 4)
    title = " ".join(words)
    sections.append(f"{depth} `{title}`\n\n```text\n$ {title} --help\n{parser.format_help().rstrip()}\n```\n")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                _walk(sub, [*words, name], sections)


def hooks_reference() -> str:
    """Each hook specification: signature, whether the first answer wins, and its docstring."""
    from xcore.hooks import specs

    out: list[str] = []
    in_source_order = sorted(inspect.getmembers(specs, inspect.isfunction), key=lambda f: f[1].__code__.co_firstlineno)
    for name, func in in_source_order:
        options = getattr(func, "xcore_spec", None)
        if not name.startswith("xcore_") or options is None:
            continue
        signature = str(inspect.signature(func)).replace("'", "")
        first = ""
        if options.get("firstresult") and "first non-None result" not in (func.__doc__ or ""):
            first = "\n\nStops at the first non-None result."
        doc = _rst_to_markdown(inspect.cleandoc(func.__doc__ or "(no docstring)"))
        out.append(f"## `{name}`\n\n```python\ndef {name}{signature}\n```\n\n{doc}{first}\n")
    if not out:
        raise RuntimeError("no hook specifications found in xcore/hooks/specs.py")
    return _rst_to_markdown(inspect.cleandoc(specs.__doc__ or "")) + "\n\n" + "\n".join(out)


def _rst_to_markdown(text: str) -> str:
    """The few reStructuredText forms the specs' docstrings use: ``code``, `::` and titles."""
    text = re.sub(r"^(.+)\n-{3,}$", r"## \1", text, flags=re.MULTILINE)
    # Field lists become a list: `:param name:` -> `- **name**:`, `:return:`, `:raises E:`.
    text = re.sub(r"^:param (\w+):", r"- **\1**:", text, flags=re.MULTILINE)
    text = re.sub(r"^:returns?:", "- **returns**:", text, flags=re.MULTILINE)
    text = re.sub(r"^:raises ([\w.]+):", r"- **raises** `\1`:", text, flags=re.MULTILINE)
    text = re.sub(r"^(- \*\*)", r"\n\1", text, count=1, flags=re.MULTILINE)  # a blank line opens the list
    return text.replace("``", "`").replace("::\n", ":\n")
