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
from xcore.model.validation import FieldTypeError, check_field_types

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
    with pytest.raises(FieldTypeError,
                       match=r"Cloud\(replicas='2'\): expected a whole number \(int\) or None, got str"):
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
    local = xlocal.Local(cwd=tmp_path, kill_grace_secs=2, max_parallel=3,
                         docker_options=xlocal.DockerOptions(volumes={tmp_path: "/data"}))
    assert local.cwd == str(tmp_path) and local.kill_grace_secs == 2
    assert local.docker_options.volumes == {str(tmp_path): "/data"}
    with pytest.raises(FieldTypeError, match=r"Local\(docker_options=...\): DockerOptions\(ports=\{'80': 8080\}\)"):
        xlocal.Local(docker_options=xlocal.DockerOptions(ports={"80": 8080}))


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
        db.execute("UPDATE work_units SET status = 'PAUSED' WHERE experiment_id = 2")  # a newer version's
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
    # As in XManager: None leaves the flag out, a flat list repeats it.
    assert run_xcore("logs", "1/1").stdout == "['--f=0.5', '--p=/d', '--l=1', '--l=a', '--nob'] 3\n"


# -- item 13 (terminal part): user text never reaches the terminal as control sequences ------

ESC_TITLE = "title\x1b[31mred\x1b]0;pwned\x07"


def test_control_characters_are_escaped_in_tables_and_exact_in_json(tmp_path):
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment({ESC_TITLE!r}, tags=["t\\x1b[2J"], notes="n\\x9bote\\u202eevil") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "import sys; sys.exit(3)"])])
    e.add(xm.Job(exe, xlocal.Local(), args={{"x": "a\\x1b[8mhidden"}}))
""")
    launched = run_xcore("launch", "--wait", str(script), env={"XCORE_QUIET": "0"})
    assert launched.returncode == 1
    outputs = [launched.stderr, run_xcore("list").stdout, run_xcore("show", "1").stdout,
               run_xcore("wait", "1").stdout, run_xcore("cancel", "1").stdout]
    for text in outputs:
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\u202e" not in text, text
    assert "title\\x1b[31mred\\x1b]0;pwned\\x07" in outputs[1] and "t\\x1b[2J" in outputs[1]
    assert "n\\x9bote\\u202eevil" in outputs[2]
    listed = json.loads(run_xcore("list", "--json").stdout)[0]
    assert listed["title"] == ESC_TITLE and listed["tags"] == ["t\x1b[2J"] and listed["notes"] == "n\x9bote\u202eevil"
    shown = json.loads(run_xcore("show", "1", "--json").stdout)
    assert shown["work_units"][0]["args"] == {"x": "a\x1b[8mhidden"}


# -- item 16: honest CLI output --------------------------------------------------------------


def test_failed_launch_lists_as_failed_not_completed(tmp_path):
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("half") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "pass"])])
    e.add(xm.Job(exe, xlocal.Local())).result()
    raise ValueError("config 2 is bad")
""")
    assert run_xcore("launch", "--wait", str(script)).returncode == 1
    run_xcore("wait", "1", "--timeout", "30")
    listed = run_xcore("list")
    assert "FAILED" in listed.stdout and "COMPLETED" not in listed.stdout.split("\n")[1], listed.stdout
    assert json.loads(run_xcore("list", "--json", "--status", "failed").stdout)[0]["id"] == 1


def test_script_failing_before_adding_leaves_a_failed_experiment_not_a_launching_one(tmp_path):
    script = write_script(tmp_path / "launch.py", """
experiment = xm.create_experiment("never closed")
raise RuntimeError("missing data file")
""")
    result = run_xcore("launch", str(script))
    assert result.returncode == 1 and "missing data file" in result.stderr
    [record] = json.loads(run_xcore("list", "--json").stdout)
    assert record["status"] == "FAILED" and "missing data file" in record["launch_error"]


def test_bad_list_show_arguments_are_errors(tmp_path):
    _launch_ok(tmp_path, count=1)
    bogus = run_xcore("list", "--status", "BOGUS")
    assert bogus.returncode == 1 and "RUNNING, COMPLETED, FAILED, CANCELLED" in bogus.stderr
    negative = run_xcore("list", "-n", "-1")
    assert negative.returncode == 1 and "--limit" in negative.stderr
    missing = run_xcore("show", "1/99")
    assert missing.returncode == 1 and "Experiment 1 has no work unit 99" in missing.stderr
    assert run_xcore("logs", "1/99").returncode == 1
    waited = run_xcore("wait", "1/99")
    assert waited.returncode == 1 and "Experiment 1 has no work unit 99" in waited.stderr


def test_counts_read_as_english(tmp_path):
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("one") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "import time; time.sleep(30)"])])
    e.add(xm.Job(exe, xlocal.Local()))
""")
    launched = run_xcore("launch", str(script), env={"XCORE_QUIET": "0"})
    assert launched.returncode == 0, launched.stderr
    assert "1 work unit launched" in launched.stderr and "launched 1 job on xlocal.Local\n" in launched.stderr
    assert "1 jobs" not in launched.stderr and "1 work units" not in launched.stderr
    timeout = run_xcore("wait", "1", "--timeout", "0.2")
    assert timeout.returncode == 124 and "1 job still active" in timeout.stderr
    job = xm.Binary(PY).name  # named after the interpreter: python, python3, ... as XManager names it
    assert f"  1/{job}: RUNNING" in timeout.stderr or f"  1/{job}: PENDING" in timeout.stderr  # with why
    cancelled = run_xcore("cancel", "1")
    assert cancelled.stdout == "cancelled 1 job of experiment 1\n"
    assert run_xcore("cancel", "1/1").stdout == "cancelled 0 jobs of work unit 1/1\n"
    waited = run_xcore("wait", "1")
    assert waited.stdout.startswith("experiment 1: 1 job: 1 cancelled\n")


def test_error_messages_have_no_doubled_period(tmp_path):
    script = write_script(tmp_path / "launch.py", """
with xm.create_experiment("x") as e:
    e.package([xm.binary(xlocal.Local.Spec(), "definitely-not-a-command-xyz")])
""")
    result = run_xcore("launch", str(script))
    assert result.returncode == 1 and "not found on PATH" in result.stderr
    assert ".." not in result.stderr.replace("...", ""), result.stderr


def test_progress_without_terminal_prints_only_changes(tmp_path):
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("slow") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "import time; time.sleep(3)"])])
    e.add(xm.Job(exe, xlocal.Local()))
""")
    assert run_xcore("launch", str(script)).returncode == 0
    waited = run_xcore("wait", "1", env={"XCORE_QUIET": "0"})
    assert waited.returncode == 0
    lines = [line for line in waited.stderr.splitlines() if line.startswith("experiment 1")]
    assert lines and len(lines) == len(set(lines)), waited.stderr


def test_show_does_not_cut_arguments_when_piped(tmp_path):
    long_value = "v" * 400
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("long") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "pass"])])
    e.add(xm.Job(exe, xlocal.Local(), args={{"long": {long_value!r}}}))
""")
    assert run_xcore("launch", "--wait", str(script)).returncode == 0
    shown = run_xcore("show", "1", env={"COLUMNS": "80"})
    assert long_value in shown.stdout and "…" not in shown.stdout


# -- item 17: relative paths, examples that leave the checkout clean, stdlib-named scripts ----


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text("import sys\nprint('trained', sys.argv[1:])\n")
    tool = project / "bin" / "tool.sh"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho tool \"$@\"\n")
    tool.chmod(0o755)
    (project / "launch.py").write_text("""
import xcore as xm
import xlocal
with xm.create_experiment("relative") as e:
    [train, tool] = e.package([xm.python_module(xlocal.Local.Spec(), "train", path="src"),
                               xm.binary(xlocal.Local.Spec(), "bin/tool.sh")])
    e.add(xm.Job(train, xlocal.Local(), args={"lr": 0.1}))
    e.add(xm.Job(tool, xlocal.Local(), args=["x"]))
""")
    return project


@pytest.mark.parametrize("how", ["xcore launch", "python"])
def test_relative_paths_resolve_against_the_launch_script(tmp_path, how):
    project = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if how == "python":
        result = subprocess.run([PY, str(project / "launch.py")], cwd=elsewhere, capture_output=True, text=True,
                                check=False, timeout=120)
    else:
        result = run_xcore("launch", str(project / "launch.py"), cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert run_xcore("wait", "1", "--timeout", "60").returncode == 0
    assert run_xcore("logs", "1/1").stdout == "trained ['--lr=0.1']\n"
    assert run_xcore("logs", "1/2").stdout == "tool x\n"


def test_every_packageable_path_resolves_through_the_core(tmp_path, monkeypatch):
    import xhpc
    from xcore import paths

    monkeypatch.chdir(tmp_path)
    script_dir = tmp_path / "scripts"
    script_dir.mkdir()
    (script_dir / "Dockerfile.gpu").write_text("FROM scratch\n")
    paths.set_launch_script(script_dir / "launch.py")
    try:
        spec = xlocal.Local.Spec()
        assert xm.python_module(spec, "m", path="src").executable_spec.path == str(script_dir / "src")
        assert xm.python_module(spec, "m").executable_spec.path == str(script_dir)
        assert xm.binary(spec, "./run.sh").executable_spec.path == str(script_dir / "run.sh")
        assert xm.binary(spec, "python3").executable_spec.path == "python3"  # a command on PATH
        container = xm.python_container(spec, xm.ModuleName("m"), path="proj").executable_spec
        assert container.path == str(script_dir / "proj")
        docker = xm.dockerfile_container(spec, "ctx", dockerfile="Dockerfile.gpu").executable_spec
        assert (docker.path, docker.dockerfile) == (str(script_dir / "ctx"), str(script_dir / "Dockerfile.gpu"))
        assert xhpc.PythonPackage(xm.ModuleName("m"), path="pkg").path == str(script_dir / "pkg")
        assert xm.binary(spec, "/abs/tool").executable_spec.path == "/abs/tool"
    finally:
        paths.set_launch_script(None)
    assert xm.python_module(xlocal.Local.Spec(), "m", path="src").executable_spec.path == "src"


def test_launch_script_named_like_a_stdlib_module_is_refused(tmp_path):
    script = write_script(tmp_path / "secrets.py", f"""
with xm.create_experiment("shadow") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "pass"])])
    e.add(xm.Job(exe, xlocal.Local()))
""")
    result = run_xcore("launch", str(script), timeout=60)
    assert result.returncode == 1
    assert "standard library module 'secrets'" in result.stderr and "Rename it" in result.stderr


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


def test_examples_leave_the_checkout_clean(xcore_home):
    before = _git_status()
    result = run_xcore("launch", "--wait", "examples/sweep/launch.py", "--", "--steps=20", cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr
    assert run_xcore("launch", "examples/xmanager_port/launch.py", cwd=REPO).returncode == 0
    assert _git_status() == before
    assert len(list((xcore_home / "results" / "sweep").rglob("metrics.json"))) == 20


def test_stdlib_named_script_run_with_python_is_refused(tmp_path):
    script = write_script(tmp_path / "secrets.py", f"""
with xm.create_experiment("shadow") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "pass"])])
    e.add(xm.Job(exe, xlocal.Local()))
""")
    result = subprocess.run([PY, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0 and "standard library module 'secrets'" in result.stderr
    assert json.loads(run_xcore("list", "--json").stdout) == []


def test_sge_pending_reason_is_shown_by_show_and_wait(tmp_path, xcore_home, monkeypatch):
    """A held SGE task (our own, cancelled at the end) reads with its reason, not a bare PENDING."""
    from xcore.testing import require_service

    sge_up = subprocess.run(["qstat", "-g", "c"], capture_output=True, check=False).returncode == 0
    require_service("sge", sge_up, "run `bash scripts/infra/setup.sh sge` as root")
    config = tmp_path / "xcore-config"
    config.mkdir(exist_ok=True)
    (config / "clusters.toml").write_text(
        f'[clusters.held]\nscheduler = "sge"\nstaging = "{tmp_path / "staging"}"\nlocal = true\n')
    monkeypatch.setenv("XCORE_CLUSTER", "held")
    script = tmp_path / "launch.py"
    script.write_text("""
import xcore as xm
import xhpc
with xm.create_experiment("held") as e:
    [exe] = e.package([xm.Packageable(xhpc.Command(["true"]), xhpc.GridEngine.Spec())])
    e.add(xm.Job(exe, xhpc.GridEngine(queue="all.q", directives=["-h"])))
""")
    try:
        launched = run_xcore("launch", str(script))
        assert launched.returncode == 0, launched.stderr
        shown = run_xcore("show", "1")
        # the scheduler's own words (qstat -j): "held (Job is in hold state)"
        assert "PENDING" in shown.stdout and "pending: held (" in shown.stdout, shown.stdout
        waited = run_xcore("wait", "1", "--timeout", "1")
        assert waited.returncode == 124 and "1/command: PENDING pending: held (" in waited.stderr, waited.stderr
    finally:
        assert run_xcore("cancel", "1").returncode == 0
