"""Why it failed (issue 26, item 5): a failed job's message carries its error line, found in the
tail of its log when its results are read (once, on the fake backend here; xlocal has its own
test), shown by ``show``, ``--json`` and searchable with ``--where error~...``."""

from __future__ import annotations

import json
import sys

import pytest

import xcore as xm
from xcore.cli.main import main
from xcore.model.error_lines import MAX_CHARS, Tail, error_line, with_error
from xcore.testing import fake, plugin_host

TRACEBACK = """epoch 1 loss 0.3
Traceback (most recent call last):
  File "train.py", line 3, in <module>
    raise ValueError("bad batch")
ValueError: bad batch

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "train.py", line 5, in <module>
    raise RuntimeError("NaN loss")
RuntimeError: NaN loss
XCORE_RESULT {"loss": 1}
"""


def test_the_error_line_is_the_last_exception_else_the_last_line():
    assert error_line(TRACEBACK) == "RuntimeError: NaN loss"
    assert error_line("step 1\n\x1b[31mCUDA out of memory\x1b[0m\n\nXCORE_RESULT {\"a\": 1}\n  \n") == \
        "CUDA out of memory"
    assert error_line("10%\r50%\r99%\n") == "99%"
    assert error_line("") == "" and error_line("\n \n") == ""
    assert error_line("x" * 1000) == "x" * (MAX_CHARS - 1) + "…"
    tail = Tail(10)
    for chunk in ("abc", "defghijkl", "mnop"):
        tail.feed(chunk)
    assert tail.text == "ghijklmnop"
    for i in range(1000):  # many small chunks: trimmed as it goes, the tail still exact
        tail.feed(str(i % 10))
    assert tail.text == "0123456789" and len(tail._parts) <= 21
    assert with_error("exit code 1", "E") == "exit code 1; error: E" == with_error("exit code 1; error: E", "E")


RAISES = ("import sys; a = dict(x[2:].split('=') for x in sys.argv[1:]); i = int(a['i']); "
          "print('XCORE_RESULT {\"loss\": 0.5}'); "
          "sys.stderr.write('noise ' * 20000 + '\\n') if i == 3 else None; "
          "exec(\"if i == 1: raise RuntimeError('NaN loss')\"); "
          "sys.exit(0 if i == 2 else 3) if i != 3 else (print('CUDA out of memory', file=sys.stderr), sys.exit(2))")


@pytest.fixture
def failing(xcore_home) -> int:
    plugin_host({"fake": fake})
    with xm.create_experiment("failures") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", RAISES])])
        for i in (1, 2, 3):
            experiment.add(xm.Job(exe, fake.FakeExecutor(), args={"i": i}))
    experiment.wait_until_complete()
    return experiment.experiment_id


def _units(capsys, *args: str) -> dict[int, dict]:
    capsys.readouterr()
    assert main(["show", *args, "--json"]) == 0
    return {u["id"]: u for u in json.loads(capsys.readouterr().out)["work_units"]}


def test_a_failed_jobs_message_names_its_exception_once(failing, capsys):
    units = _units(capsys, str(failing))
    assert units[1]["status"] == "FAILED"
    assert units[1]["jobs"][0]["message"] == "exit code 1; error: RuntimeError: NaN loss"
    assert units[2]["jobs"][0]["message"] == "exit code 0"  # completed: untouched
    assert units[3]["jobs"][0]["message"] == "exit code 2; error: CUDA out of memory"  # after 120 KB of noise
    assert units[1]["results"] == {"loss": 0.5}  # the same read found the results
    again = _units(capsys, str(failing))  # read once: a second show adds nothing
    assert again[1]["jobs"][0]["message"] == "exit code 1; error: RuntimeError: NaN loss"
    assert main(["show", str(failing)]) == 0
    assert "exit code 1; error: RuntimeError: NaN loss" in capsys.readouterr().out


def test_the_error_line_is_searchable(failing, capsys):
    assert list(_units(capsys, str(failing), "--where", "error~nan")) == [1]
    assert list(_units(capsys, str(failing), "--where", "message~'*out of memory'")) == [3]
    assert list(_units(capsys, str(failing), "--where", "status=failed error!~NaN")) == [3]
