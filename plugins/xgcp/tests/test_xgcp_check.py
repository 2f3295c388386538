"""``xcore vertex check`` and ``xcore vertex list``: each failure is one sentence saying what to run."""

from __future__ import annotations

import argparse
import json
import os
import socket

import pytest
from xgcp_testkit import xcore_cli


def test_check_passes_against_a_reachable_project(vertex, tmp_path):
    result = xcore_cli("vertex", "check", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert [c["check"] for c in report["checks"]] == ["credentials found", "project reachable, Vertex API enabled",
                                                      "custom-training quota"]
    assert all(c["ok"] and not c["warning"] for c in report["checks"])
    assert report["checks"][2]["detail"] == (
        "us-central1: cpus 575, nvidia_l4_gpus 8, nvidia_t4_gpus 4; 0 for 1 more (nvidia_a100_gpus)")
    assert vertex.calls["quotas"] == 1


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


def check(capsys, name=None):
    """``xcore vertex check --json`` in this process (the CLI subprocess tests above cover the wiring)."""
    from xgcp import cli

    code = cli.check_target(argparse.Namespace(name=name, json=True))
    report = json.loads(capsys.readouterr().out)
    return code, {c["check"]: c for c in report["checks"]}


def one_sentence(text):
    return text.endswith((".", "`.")) and text.count("`") in (0, 2) and "\n" not in text


def test_quota_is_read_for_the_target_region(vertex, tmp_path, capsys):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "vertex.toml").write_text('[targets.eu]\nproject = "p1"\nlocation = "europe-west4"\n')
    code, checks = check(capsys, "eu")
    assert code == 0
    assert checks["custom-training quota"]["detail"] == (
        "europe-west4: cpus 32; 0 for 3 more (nvidia_a100_gpus, nvidia_l4_gpus, nvidia_t4_gpus)")


@pytest.mark.parametrize(("code", "message", "expected"), [
    (403, "Cloud Quotas API has not been used in project fake-project before or it is disabled.",
     "Quota not visible: the Cloud Quotas API is not enabled in project fake-project: run "
     "`gcloud services enable cloudquotas.googleapis.com --project fake-project`."),
    (403, "Permission 'cloudquotas.quotas.get' denied",
     "Quota not visible: permission denied in project fake-project; grant roles/cloudquotas.viewer, e.g. "
     "`gcloud projects add-iam-policy-binding fake-project --member=user:YOU --role=roles/cloudquotas.viewer`."),
])
def test_quota_not_visible_is_a_warning_that_says_what_to_run(vertex, capsys, code, message, expected):
    vertex.fail("quotas", code, message)
    status, checks = check(capsys)
    assert status == 0, "jobs may still run: quota is a warning"
    quota = checks["custom-training quota"]
    assert (quota["ok"], quota["warning"], quota["detail"]) == (True, True, expected)
    assert one_sentence(quota["detail"])


def test_no_cpu_quota_in_the_region_is_a_warning(vertex, capsys):
    vertex.quotas["custom_model_training_cpus"] = {"": 0}
    status, checks = check(capsys)
    quota = checks["custom-training quota"]
    assert status == 0 and quota["warning"]
    assert quota["detail"].startswith("Project fake-project has no custom-training CPU quota in us-central1: request")
    assert one_sentence(quota["detail"])


@pytest.mark.parametrize(("code", "message", "expected"), [
    (403, "Vertex AI API has not been used in project fake-project before or it is disabled.",
     "The Vertex AI API is not enabled in project fake-project: run "
     "`gcloud services enable aiplatform.googleapis.com --project fake-project`."),
    (403, "Permission 'aiplatform.customJobs.list' denied on resource '//aiplatform.googleapis.com/projects/x'",
     "Permission denied in project fake-project (Permission 'aiplatform.customJobs.list' denied on resource "
     "'//aiplatform.googleapis.com/projects/x'): grant your account roles/aiplatform.user, e.g. "
     "`gcloud projects add-iam-policy-binding fake-project --member=user:YOU --role=roles/aiplatform.user`."),
    (403, "Permission denied on resource project fake-project (or it may not exist).",
     "Project fake-project does not exist or you cannot see it: check the id with "
     "`gcloud projects describe fake-project` (or set project in vertex.toml)."),
    (401, "Request had invalid authentication credentials.",
     "Google rejected the credentials: run `gcloud auth application-default login`."),
])
def test_each_vertex_failure_is_one_sentence_with_the_command(vertex, capsys, code, message, expected):
    vertex.fail("list", code, message)
    status, checks = check(capsys)
    step = checks["project reachable, Vertex API enabled"]
    assert (status, step["ok"], step["detail"]) == (1, False, expected)
    assert "custom-training quota" not in checks, "no quota check after a failed one"
    assert one_sentence(step["detail"])


def test_unreachable_endpoint_names_it_and_what_to_check(vertex, capsys, monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"  # nothing listens once the socket closes
    monkeypatch.setenv("XGCP_API_ENDPOINT", closed)
    status, checks = check(capsys)
    step = checks["project reachable, Vertex API enabled"]
    assert status == 1
    assert step["detail"] == (f"Cannot reach {closed} (ConnectionError): check the location in the target "
                              "(`xcore vertex list`) and your network or proxy settings.")


def test_text_output_marks_a_quota_warning_and_exits_0(vertex, capsys):
    from xgcp import cli

    vertex.fail("quotas", 403, "Cloud Quotas API has not been used in project fake-project before or it is disabled.")
    assert cli.check_target(argparse.Namespace(name=None, json=False)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "vertex target env (fake-project, us-central1)"
    assert [line.split(":")[0] for line in lines[1:]] == [
        "  ok   credentials found", "  ok   project reachable, Vertex API enabled", "  warn custom-training quota"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_targets_image_registry_is_checked(vertex, tmp_path, capsys):
    """The real local registry answers; a registry nobody listens on is one sentence naming it."""
    from xcore.testing import require_service
    from xcore.testing.images import LOCAL_REGISTRY as REGISTRY
    from xcore.testing.images import registry_up

    require_service("registry", registry_up)
    (tmp_path / "config").mkdir()
    dead = f"127.0.0.1:{_free_port()}"
    (tmp_path / "config" / "vertex.toml").write_text(
        f'[targets.up]\nproject = "fake-project"\nregistry = "{REGISTRY}/xcore"\n'
        f'[targets.down]\nproject = "fake-project"\nregistry = "{dead}/xcore"\n')
    code, checks = check(capsys, "up")
    assert code == 0 and checks["image registry"]["detail"] == f"registry {REGISTRY} answers (200)"
    code, checks = check(capsys, "down")
    assert code == 1 and not checks["image registry"]["ok"]
    detail = checks["image registry"]["detail"]
    assert detail.startswith(f"Cannot reach the image registry {dead} (") and one_sentence(detail), detail


def test_no_registry_in_the_target_means_no_registry_check(vertex, tmp_path, capsys):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "vertex.toml").write_text('[targets.plain]\nproject = "fake-project"\n')
    code, checks = check(capsys, "plain")
    assert code == 0 and "image registry" not in checks
