"""``xcore vertex check`` and ``xcore vertex list``: each failure is one sentence saying what to run."""

from __future__ import annotations

import json
import os

from xgcp_testkit import xcore_cli


def test_check_passes_against_a_reachable_project(vertex, tmp_path):
    result = xcore_cli("vertex", "check", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert [c["check"] for c in report["checks"]] == ["credentials found", "project reachable, Vertex API enabled"]
    assert all(c["ok"] for c in report["checks"])


def test_check_reports_a_disabled_api_with_the_command_to_run(vertex):
    vertex.fail("list", 403, "Vertex AI API has not been used in project fake-project before or it is disabled.")
    result = xcore_cli("vertex", "check")
    assert result.returncode == 1
    assert "FAIL project reachable, Vertex API enabled: The Vertex AI API is not enabled in project fake-project: " \
           "run `gcloud services enable aiplatform.googleapis.com --project fake-project`." in result.stdout


def test_check_without_credentials_says_how_to_log_in(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XGCP_", "GOOGLE_", "CLOUDSDK_"))}
    env.update(HOME=str(tmp_path), XCORE_CONFIG_DIR=str(tmp_path), GOOGLE_CLOUD_PROJECT="p",
               GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "missing.json"), NO_GCE_CHECK="True")
    result = xcore_cli("vertex", "check", env=env)
    assert result.returncode == 1
    assert "FAIL credentials found: No Google credentials found: GOOGLE_APPLICATION_CREDENTIALS names" in result.stdout
    assert "run `gcloud auth application-default login`." in result.stdout
    del env["GOOGLE_APPLICATION_CREDENTIALS"]
    result = xcore_cli("vertex", "check", env=env)
    assert result.returncode == 1
    assert "FAIL credentials found: No Google credentials found: run `gcloud auth application-default login`" \
        in result.stdout


def test_check_of_an_unknown_target_names_the_file(vertex):
    result = xcore_cli("vertex", "check", "nope")
    assert result.returncode == 1 and "vertex.toml" in result.stderr and "[targets.nope]" in result.stderr


def test_list_shows_configured_targets(vertex, tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "vertex.toml").write_text('default = "dev"\n[targets.dev]\nproject = "p1"\n')
    result = xcore_cli("vertex", "list", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["targets"][0]["project"] == "p1"
