"""Issue 13, items 8, 13, 14, 16 and 17: bad input refused at once, bad records read as such,
and CLI output that tells the truth. Run through the real CLI and real local processes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

import xcore as xm
import xlocal
from core_helpers import REPO, run_xcore, write_script
from xcore.validation import FieldTypeError, check_field_types

PY = sys.executable


def _db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "xcore.db", isolation_level=None)


def _launch_ok(tmp_path: Path, count: int = 2, title: str = "ok", extra: str = "") -> None:
    script = write_script(tmp_path / f"launch_{title.replace(' ', '_')}.py", f"""
with xm.create_experiment({title!r}) as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "print('out')"])])
    for i in range({count}):
        e.add(xm.Job(exe, xlocal.Local({extra}), args={{"i": i}}))
""")
    result = run_xcore("launch", "--wait", str(script))
    assert result.returncode == 0, result.stderr


# -- item 8: executors validated at construction; one bad row never breaks the rest ---------


def test_mistyped_executor_field_is_refused_before_anything_runs(tmp_path, xcore_home):
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("bad executor") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "pass"])])
    e.add(xm.Job(exe, xlocal.Local(kill_grace_secs="five")))
""")
    result = run_xcore("launch", str(script))
    assert result.returncode == 1
    assert "Local(kill_grace_secs='five'): expected a number (float), got str" in result.stderr
    assert "Traceback" not in result.stderr
    listed = json.loads(run_xcore("list", "--json").stdout)
    assert [e["work_unit_count"] for e in listed] == [0] and listed[0]["status"] == "FAILED"
    for command in (["show", "1"], ["wait", "1", "--timeout", "5"], ["cancel", "1"]):
        assert "Traceback" not in run_xcore(*command).stderr


def test_every_plugin_executor_is_type_checked_from_its_annotations():
    @attrs.define(kw_only=True)
    class Cloud(xm.Executor):
        zone: str = "eu"
        replicas: int | None = None
        tags: list[str] = attrs.field(factory=list)
        limits: dict[str, float] = attrs.field(factory=dict)

    assert Cloud(replicas=2, tags=["a"], limits={"cpu": 1}).replicas == 2
    with pytest.raises(FieldTypeError, match=r"Cloud\(replicas='2'\): expected a whole number \(int\) or None, got str"):
        Cloud(replicas="2")
    with pytest.raises(FieldTypeError, match=r"Cloud\(tags=\['a', 3\]\): expected list of str"):
        Cloud(tags=["a", 3])
    with pytest.raises(FieldTypeError, match=r"Cloud\(zone=True\)"):
        Cloud(zone=True)
    with pytest.raises(FieldTypeError, match="limits"):
        Cloud(limits={"cpu": "one"})

    @attrs.define(kw_only=True)
    class OwnInit(xm.Executor):  # overrides the hook without calling super: still checked at add
        retries: int = 0

        def __attrs_post_init__(self) -> None:
            pass

    executor = OwnInit(retries="3")
    with pytest.raises(FieldTypeError, match=r"OwnInit\(retries='3'\)"):
        check_field_types(executor)


def test_local_accepts_path_objects_and_numbers_where_floats_are_expected(tmp_path):
    local = xlocal.Local(cwd=tmp_path, kill_grace_secs=2, max_parallel=3)
    assert local.cwd == str(tmp_path) and local.kill_grace_secs == 2


def test_one_unreadable_row_does_not_break_any_command(tmp_path, xcore_home):
    _launch_ok(tmp_path, count=3, title="good one")
    _launch_ok(tmp_path, count=1, title="good two")
    with _db(xcore_home) as db:
        # What an older xcore let through: a handle field of the wrong type, corrupt JSON, a
        # status this version does not know.
        handle = json.loads(db.execute("SELECT handle FROM jobs WHERE id = 1").fetchone()[0])
        handle["kill_grace_secs"] = "five"
        db.execute("UPDATE jobs SET handle = ?, status = 'RUNNING' WHERE id = 1", (json.dumps(handle),))
        db.execute("UPDATE jobs SET env = '{not json' WHERE id = 2")
        db.execute("UPDATE work_units SET args = '[broken' WHERE experiment_id = 1 AND id = 3")
        db.execute("UPDATE experiments SET tags = 'nope' WHERE id = 2")
    listed = run_xcore("list")
    assert listed.returncode == 0, listed.stderr
    assert "good one" in listed.stdout and "unreadable record" in listed.stdout
    data = json.loads(run_xcore("list", "--json").stdout)
    assert [e["id"] for e in data] == [2, 1] and "JSONDecodeError" in data[0]["unreadable"]
    show = run_xcore("show", "1")
    assert show.returncode == 0, show.stderr
    assert show.stdout.count("unreadable record") == 3, show.stdout  # job 1, job 2, unit 3's args
    assert "COMPLETED" in show.stdout  # the readable unit still reads normally
    waited = run_xcore("wait", "1", "--timeout", "10")
    assert waited.returncode == 1 and "unreadable record: ValueError" in waited.stdout
    cancelled = run_xcore("cancel", "1")
    assert cancelled.returncode == 0 and "Traceback" not in cancelled.stderr
    logs = run_xcore("logs", "1/1")
    assert logs.returncode == 1 and "unreadable record" in logs.stderr and "Traceback" not in logs.stderr
    assert run_xcore("logs", "1/3").stdout == "out\n"


# -- item 14: args and env of unsupported types, and NUL bytes, refused at add ---------------


@pytest.mark.parametrize(("job_args", "message"), [
    ('args={"x": object()}', "Argument 'x' is of type object"),
    ('args={"blob": b"abc"}', "Argument 'blob' is of type bytes"),
    ('args={"ids": [1, {2, 3}]}', "Argument 'ids'[1] is of type set"),
    ('args=["ok", "a\\0b"]', "Positional argument 4 contains a NUL byte"),
    ('args={"name": "x\\0y"}', "Argument 'name' contains a NUL byte"),
    ('env_vars={"N": None}', "Environment variable N is of type NoneType"),
    ('env_vars={"RAW": b"x"}', "Environment variable RAW is of type bytes"),
    ('env_vars={"V": "a\\0"}', "Environment variable V contains a NUL byte"),
])
def test_unsupported_arg_and_env_values_are_refused_at_add(tmp_path, job_args, message):
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("typed") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "pass"])])
    e.add(xm.Job(exe, xlocal.Local(), args={{"fine": 1}}))
    e.add(xm.Job(exe, xlocal.Local(), {job_args}))
""")
    result = run_xcore("launch", str(script))
    assert result.returncode == 1 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    shown = json.loads(run_xcore("show", "1", "--json").stdout)
    assert len(shown["work_units"]) == 1  # the bad unit was never recorded; the good one stays


def test_supported_values_reach_the_job_exactly(tmp_path):
    script = write_script(tmp_path / "launch.py", f"""
from pathlib import Path
with xm.create_experiment("typed ok") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r},
                                 args=["-c", "import os, sys; print(sys.argv[1:], os.environ['N'])"])])
    e.add(xm.Job(exe, xlocal.Local(), args={{"f": 0.5, "n": None, "p": Path("/d"), "l": [1, "a"], "b": False}},
                 env_vars={{"N": 3}}))
""")
    assert run_xcore("launch", "--wait", str(script)).returncode == 0
    assert run_xcore("logs", "1/1").stdout == "['--f=0.5', '--n=None', '--p=/d', \"--l=[1, 'a']\", '--nob'] 3\n"
