"""``depends_on`` with a Kubernetes dependent (docs/pipelines.md): Kubernetes cannot wait for
another unit, so the dependent is held, unsubmitted, and released by an xcore process that
observes its dependencies end; here a chain across backends, xlocal -> the fake API server,
released by three `xcore wait` at once: the Job is created exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

PY = sys.executable
# A dependency that ends only once the test lets it (the file ``gate`` exists).
GATED = ("import os, sys, time\n"
         "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
         "open(sys.argv[2], 'a').write('A\\n')")
# The Kubernetes job: the fake's kubelet runs its command as a local process.
APPEND = "import sys; open(sys.argv[1], 'a').write('B\\n')"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_QUIET", "1")
    monkeypatch.delenv("XCORE_STORE", raising=False)
    return tmp_path / "home"


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "xcore.cli.main", *args], capture_output=True, text=True, timeout=timeout)


def _show() -> dict:
    shown = _cli("show", "1", "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_a_chain_from_xlocal_to_kubernetes_is_released_once_by_three_concurrent_waits(fake_k8s_run, home, tmp_path):
    gate, out = tmp_path / "gate", tmp_path / "ran.txt"
    script = tmp_path / "launch.py"
    script.write_text(f"""
import xcore as xm
import xk8s
import xlocal

with xm.create_experiment("across") as e:
    [local] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", {GATED!r}])])
    [pod] = e.package([xk8s.image("img", ["python3", "-c", {APPEND!r}])])
    a = e.add(xm.Job(local, xlocal.Local(), args=[{str(gate)!r}, {str(out)!r}]))
    e.add(xm.Job(pod, xk8s.Kubernetes(), args=[{str(out)!r}]), depends_on=[a])
""")
    launched = _cli("launch", str(script))
    assert launched.returncode == 0, launched.stderr  # the launcher is gone
    held = _show()["work_units"][1]
    assert (held["status"], held["jobs"][0]["message"]) == ("PENDING", "waiting for 1/1")
    assert fake_k8s_run.calls("POST", "/jobs") == 0  # held: nothing on the cluster yet

    observers = [subprocess.Popen([PY, "-m", "xcore.cli.main", "wait", "1", "--timeout", "120"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    gate.touch()  # A ends while the three observers watch
    outs = [p.communicate(timeout=180) for p in observers]
    assert [p.returncode for p in observers] == [0, 0, 0], outs

    assert fake_k8s_run.calls("POST", "/jobs") == 1  # one observer created the Job
    assert out.read_text() == "A\nB\n"  # B ran once, after A
    shown = _show()
    assert [u["status"] for u in shown["work_units"]] == ["COMPLETED", "COMPLETED"]
    assert shown["work_units"][1]["depends_on"] == ["1/1"]


def test_a_failed_xlocal_dependency_cancels_the_held_kubernetes_unit(fake_k8s_run, home, tmp_path):
    script = tmp_path / "launch.py"
    script.write_text(f"""
import xcore as xm
import xk8s
import xlocal

with xm.create_experiment("across") as e:
    [local] = e.package([xm.binary(xlocal.Local.Spec(), {PY!r}, args=["-c", "raise SystemExit(3)"])])
    [pod] = e.package([xk8s.image("img", ["python3", "-c", "print('never')"])])
    a = e.add(xm.Job(local, xlocal.Local()))
    e.add(xm.Job(pod, xk8s.Kubernetes()), depends_on=[a])
""")
    assert (launched := _cli("launch", str(script))).returncode == 0, launched.stderr
    deadline = time.monotonic() + 120
    while (shown := _show())["work_units"][1]["status"] != "CANCELLED":  # `show` observes too
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)
    assert shown["work_units"][1]["jobs"][0]["message"] == "dependency 1/1 failed"
    assert fake_k8s_run.calls("POST") == 0  # never created on the cluster
