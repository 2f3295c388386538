"""Property: any argument and environment string reaches a local process byte-for-byte, through
xlocal's runner (the core's part, on the fake backend: tests/test_argument_roundtrip.py)."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xcore as xm
import xlocal

pytestmark = pytest.mark.usefixtures("xcore_home")

# Everything a process can receive in argv/env: any unicode except NUL and lone surrogates.
arg_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
NASTY = ["a b", "it's", '"q"', "$HOME", "`id`", "$(id)", "back\\slash", "new\nline", "ünï €", "", "-", "--x=y", "*"]

ECHO = ("import json, os, sys\n"
        "json.dump({'argv': sys.argv[1:], 'env': os.environ.get('XCORE_T', None)},"
        " open(os.environ['OUT'], 'w', encoding='utf-8', errors='surrogateescape'))")


def _run(cases, tmp_path):
    with xm.create_experiment("roundtrip") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", ECHO])])
        for i, (args, env) in enumerate(cases):
            env_vars = {"XCORE_T": env, "OUT": str(tmp_path / f"{i}.json")}
            experiment.add(xm.Job(exe, xlocal.Local(), args=args, env_vars=env_vars))
    experiment.wait_until_complete()
    return [json.loads((tmp_path / f"{i}.json").read_text(encoding="utf-8")) for i in range(len(cases))]


def test_nasty_arguments_arrive_unchanged(tmp_path):
    [result] = _run([(NASTY, "$HOME `id` 'q' \"d\"\nline")], tmp_path)
    assert result == {"argv": NASTY, "env": "$HOME `id` 'q' \"d\"\nline"}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(arg_text, max_size=5), arg_text), min_size=1, max_size=4))
def test_arbitrary_arguments_arrive_unchanged(tmp_path_factory, cases):
    tmp_path = tmp_path_factory.mktemp("rt")
    results = _run(cases, tmp_path)
    assert [r["argv"] for r in results] == [args for args, _ in cases]
    assert [r["env"] for r in results] == [env for _, env in cases]


def test_url_password_in_an_argument_reaches_the_job_but_is_stored_and_shown_masked(xcore_home, tmp_path):
    """The README's rule for every value: a URL's password is masked, in arguments too, while
    the program still receives the argument byte for byte."""
    from xlocal_helpers import run_xcore

    arg = "--db=postgresql://u:secret@h/db"
    out = tmp_path / "argv.json"
    with xm.create_experiment("url password") as experiment:
        [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable,
                                              args=["-c", ECHO, "--exe=https://u:secret@h/x"])])
        experiment.add(xm.Job(exe, xlocal.Local(), args={"db": "postgresql://u:secret@h/db", "plain": "x"},
                              env_vars={"OUT": str(out)}))
    experiment.wait_until_complete()
    assert json.loads(out.read_text(encoding="utf-8"))["argv"] == ["--exe=https://u:secret@h/x", arg, "--plain=x"]
    stored = b"".join(path.read_bytes() for path in xcore_home.glob("xcore.db*") if path.is_file())
    assert stored, "no store file"
    assert b"secret" not in stored, "the URL's password is in the store file"
    shown = run_xcore("show", str(experiment.experiment_id))
    as_json = run_xcore("show", str(experiment.experiment_id), "--json")
    assert shown.returncode == 0 and as_json.returncode == 0, shown.stderr + as_json.stderr
    assert "secret" not in shown.stdout + shown.stderr and "secret" not in as_json.stdout + as_json.stderr
    [unit] = json.loads(as_json.stdout)["work_units"]
    assert unit["args"] == {"db": "postgresql://u:<redacted>@h/db", "plain": "x"}
    assert unit["jobs"][0]["args"][-3:] == ["--exe=https://u:<redacted>@h/x", "--db=postgresql://u:<redacted>@h/db",
                                            "--plain=x"]
