"""The xcore command line, run as a user runs it."""

from __future__ import annotations

import hashlib
import json
import sys

from core_helpers import REPO, run_xcore, write_script

PY = sys.executable


def _sweep(tmp_path, body_after: str = "", count: int = 3):
    return write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("cli sweep", tags=["t1"]) as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "print('hi')"])])
    for i in range({count}):
        e.add(xm.Job(exe, xlocal.Local(), args={{"i": i}}))
{body_after}
""")


def test_launch_wait_list_show_logs(tmp_path):
    script = _sweep(tmp_path)
    result = run_xcore("launch", "--wait", str(script))
    assert result.returncode == 0, result.stderr
    assert "experiment 1 'cli sweep': 3 work units launched" in result.stderr
    listing = run_xcore("list")
    assert listing.returncode == 0 and "COMPLETED" in listing.stdout and "3: 3 completed" in listing.stdout
    data = json.loads(run_xcore("list", "--json").stdout)
    assert data[0]["id"] == 1 and data[0]["status"] == "COMPLETED" and data[0]["tags"] == ["t1"]
    assert data[0]["script_sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    assert json.loads(run_xcore("list", "--json", "--tag", "nope").stdout) == []
    assert json.loads(run_xcore("list", "--json", "--status", "failed").stdout) == []
    show = run_xcore("show", "1")
    assert "i=2" in show.stdout and "COMPLETED" in show.stdout and "DURATION" in show.stdout
    assert run_xcore("logs", "1/3").stdout == "hi\n"


def test_launch_script_args_after_double_dash(tmp_path):
    script = write_script(tmp_path / "launch.py", "print('ARGV', sys.argv[1:])\n")
    result = run_xcore("launch", str(script), "--", "--flag", "a b")
    assert result.returncode == 0 and "ARGV ['--flag', 'a b']" in result.stdout


def test_script_that_raises_keeps_what_was_launched(tmp_path):
    script = _sweep(tmp_path, "raise RuntimeError('oops after launching')\n")
    # The raise is after the with-block: the experiment is complete, the script still fails.
    result = run_xcore("launch", str(script))
    assert result.returncode == 1
    assert "RuntimeError: oops after launching" in result.stderr and "experiment 1 (3 work units)" in result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(run_xcore("list", "--json").stdout)[0]["work_unit_count"] == 3


def test_script_raising_inside_experiment_marks_launch_failed(tmp_path):
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("half") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "pass"])])
    for i in range(5):
        if i == 2:
            raise ValueError("bad trial config")
        e.add(xm.Job(exe, xlocal.Local(), args={{"i": i}}))
""")
    result = run_xcore("launch", str(script))
    assert result.returncode == 1 and "ValueError: bad trial config (line 9: raise ValueError" in result.stderr
    assert "xcore show 1" in result.stderr
    run_xcore("wait", "1", "--timeout", "30")
    show = json.loads(run_xcore("show", "1", "--json").stdout)
    assert show["launch_status"] == "LAUNCH_FAILED" and "bad trial config" in show["launch_error"]
    assert [u["status"] for u in show["work_units"]] == ["COMPLETED", "COMPLETED"]
    assert "launch   FAILED: ValueError: bad trial config" in run_xcore("show", "1").stdout


def test_bad_resource_spec_is_one_clear_paragraph(tmp_path):
    script = write_script(tmp_path / "launch.py", "xlocal.Local(requirements=xm.JobRequirements(cpus=2))\n")
    result = run_xcore("launch", str(script))
    assert result.returncode == 1
    assert "Unknown resource 'cpus' in JobRequirements. Did you mean cpu?" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_executor_kind_lists_plugins(tmp_path):
    script = write_script(tmp_path / "launch.py", f"""
import attrs
@attrs.define(kw_only=True)
class Cloud(xm.Executor):
    pass
with xm.create_experiment("x") as e:
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r})])
    e.add(xm.Job(exe, Cloud()))
""")
    result = run_xcore("launch", str(script))
    assert result.returncode == 1 and "Installed plugins:" in result.stderr and "xlocal" in result.stderr


def test_wait_exit_codes_and_timeout(tmp_path):
    script = write_script(tmp_path / "launch.py", f"""
with xm.create_experiment("w") as e:
    sleep = "import time,sys; time.sleep(float(sys.argv[1][4:]))"
    [exe] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", sleep])])
    e.add(xm.Job(exe, xlocal.Local(), args={{"t": 5}}))
""")
    assert run_xcore("launch", str(script)).returncode == 0
    assert run_xcore("wait", "1", "--timeout", "0.5").returncode == 124
    assert run_xcore("cancel", "1/1").stdout.strip() == "cancelled 1 job of work unit 1/1"
    waited = run_xcore("wait", "1", "--json")
    assert waited.returncode == 1 and json.loads(waited.stdout)["jobs"][0]["status"] == "CANCELLED"


def test_errors_for_bad_references():
    assert "No experiment 42" in run_xcore("show", "42").stderr
    bad = run_xcore("logs", "x/y")
    assert bad.returncode == 1 and "not an experiment reference" in bad.stderr
    assert run_xcore("logs", "1").returncode == 1


def test_help_lists_commands():
    result = run_xcore("--help")
    for command in ("launch", "list", "show", "wait", "cancel", "logs", "plugins"):
        assert command in result.stdout


def test_examples_sweep_finishes_with_metrics(tmp_path):
    result = run_xcore("launch", "--wait", str(REPO / "examples/sweep/launch.py"), "--", "--steps=50",
                       f"--results={tmp_path / 'r'}", timeout=300)
    assert result.returncode == 0, result.stderr
    metrics = sorted((tmp_path / "r").rglob("metrics.json"))
    assert len(metrics) == 20
    assert all(json.loads(m.read_text())["steps"] == 50 for m in metrics)
    made = [p for p in (tmp_path / "r").rglob("*")]
    assert made and all(p.stat().st_mode & 0o077 == 0 for p in made), [oct(p.stat().st_mode) for p in made][:3]
    show = json.loads(run_xcore("show", "1", "--json").stdout)
    assert len(show["work_units"]) == 20 and {u["status"] for u in show["work_units"]} == {"COMPLETED"}


def test_xmanager_port_example_runs():
    result = run_xcore("launch", str(REPO / "examples/xmanager_port/launch.py"), timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(run_xcore("show", "1", "--json").stdout)["status"] == "COMPLETED"
