"""docs/porting.md's claims that need xlocal (issue 29): the ``xm_local`` table's fields, and what a
job on xlocal gets (its name, its arguments byte for byte, the checks at ``add``). The core's
checks of the page are in tests/test_porting_doc.py."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from xlocal_helpers import REPO

import xcore as xm
import xlocal

pytestmark = pytest.mark.usefixtures("xcore_home")

DOC = (REPO / "docs" / "porting.md").read_text()
LOCAL_SECTION = DOC.split("## `xm_local` -> `xlocal`")[1].split("\n## ")[0]


def row(start: str) -> str:
    return next(line for line in LOCAL_SECTION.splitlines() if line.startswith(f"| `{start}"))


def keyword_only(cls) -> list[str]:
    return [name for name, p in inspect.signature(cls).parameters.items() if p.kind is p.KEYWORD_ONLY]


@pytest.mark.parametrize("cls", [xlocal.Local, xlocal.DockerOptions])
def test_the_fields_are_xm_locals_positions_and_the_listed_keywords(cls):
    line = row(f"xm_local.{cls.__name__}(")
    positions = re.search(rf"`xm_local\.{cls.__name__}\(([^)]*)\)`", line).group(1).split(", ")
    parameters = list(inspect.signature(cls).parameters)
    assert parameters[:len(positions)] == positions
    added = re.findall(r"`(\w+)`", line.split("keyword-only")[1])
    assert keyword_only(cls) == added
    xm_local = pytest.importorskip("xmanager.xm_local", reason="XManager is not installed (scripts/test.sh has it)")
    assert list(inspect.signature(getattr(xm_local, cls.__name__)).parameters) == positions


def test_the_experiment_functions_are_xcores_and_output_is_not_streamed_by_default():
    for name in ("create_experiment", "get_experiment", "list_experiments"):
        assert f"`{name}`" in LOCAL_SECTION or f"`xm_local.{name}`" in LOCAL_SECTION
        assert getattr(xlocal, name) is getattr(xm, name)
    assert isinstance(xlocal.Local.Spec(), xlocal.LocalSpec)
    assert xlocal.Local().experimental_stream_output is False  # "Jobs are detached"


def test_a_job_gets_its_executables_name_and_its_arguments_unexpanded(tmp_path: Path):
    out = tmp_path / "args.txt"
    with xm.create_experiment("porting doc") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), "/bin/sh", args=[
            "-c", 'printf "%s|" "$@" > "$0"', str(out)])])
        unit = experiment.add(xm.Job(exe, xlocal.Local(), args=[xm.ShellSafeArg("$HOME"), "a b", "$x"]),
                              identity="once")
        again = experiment.add(xm.Job(exe, xlocal.Local()), identity="once")
        with pytest.raises(Exception, match="unit"):  # bytes are refused at add, naming the argument
            experiment.add(xm.Job(exe, xlocal.Local(), args={"unit": b"raw"}))
    experiment.wait_until_complete(timeout=60)
    assert again.result() is unit.result()  # identity: the existing unit, not a second one
    [job] = unit.result().launched_jobs
    assert job.name == "sh"  # XManager's name_from_path of /bin/sh
    assert out.read_text() == "$HOME|a b|$x|"  # no shell: byte for byte
