"""Numbers from environment variables: a bad value stops with the variable's name and what to
set, before anything is recorded or submitted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core_helpers import run_xcore, run_xcore_fake, write_fake_script
from xcore.errors import ConfigurationError
from xcore.settings import env_int, env_number


@pytest.mark.parametrize("text", ["abc", "nan", "inf", "-1", "1e999"])
def test_a_bad_number_names_the_variable_and_what_to_set(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("XCORE_SOME_SECS", text)
    with pytest.raises(ConfigurationError, match=r"XCORE_SOME_SECS=.* set it to .*or unset it"):
        env_number("XCORE_SOME_SECS", 2.5)


def test_unset_or_empty_is_the_default_and_a_good_value_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XCORE_SOME_SECS", raising=False)
    assert env_number("XCORE_SOME_SECS", 2.5) == 2.5
    monkeypatch.setenv("XCORE_SOME_SECS", " ")
    assert env_number("XCORE_SOME_SECS", 2.5) == 2.5
    monkeypatch.setenv("XCORE_SOME_SECS", "0.25")
    assert env_number("XCORE_SOME_SECS", 2.5) == 0.25
    monkeypatch.setenv("XCORE_SOME_COUNT", "7")
    assert env_int("XCORE_SOME_COUNT", 256, minimum=1) == 7


@pytest.mark.parametrize("text", ["1.5", "many", "0"])
def test_a_bad_count_names_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("XCORE_SOME_COUNT", text)
    with pytest.raises(ConfigurationError, match="XCORE_SOME_COUNT="):
        env_int("XCORE_SOME_COUNT", 256, minimum=1)


def test_a_launch_with_a_bad_group_size_fails_cleanly_and_records_nothing(tmp_path: Path, xcore_home: Path) -> None:
    script = write_fake_script(tmp_path / "launch.py", """
with xm.create_experiment("bad env") as e:
    [exe] = e.package([xm.binary(fake.FakeSpec(), "/bin/true")])
    e.add(xm.Job(exe, fake.FakeExecutor()))
""")
    out = run_xcore_fake("launch", str(script), env={"XCORE_RECORD_GROUP": "lots"})
    assert out.returncode != 0
    assert "XCORE_RECORD_GROUP='lots' is not a whole number" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    listed = run_xcore("list", "--json")
    assert listed.returncode == 0, listed.stderr
    [experiment] = json.loads(listed.stdout)
    assert experiment["work_unit_count"] == 0 and experiment["launch_status"] == "LAUNCH_FAILED", experiment
    assert "XCORE_RECORD_GROUP" in experiment["launch_error"], experiment
