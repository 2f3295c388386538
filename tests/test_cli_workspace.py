"""The session's ``Workspace`` (settings, plugin host, store) that the CLI, the dashboard and the
launch API share, and the one read model (``ExperimentView``, ``UnitView``) they render."""

from __future__ import annotations

import ast
from pathlib import Path

import xcore as xm
from xcore.cli.main import main
from xcore.hooks.host import built_host, get_host, reset_host
from xcore.model.status import Status
from xcore.store.records import ExperimentRecord
from xcore.testing import fake, plugin_host
from xcore.workspace import Workspace, current
from xcore.workspace.views import ExperimentView, UnitView

XCORE = Path(__file__).resolve().parent.parent / "xcore"


def test_the_process_has_one_workspace_and_one_store_until_its_settings_change(xcore_home, monkeypatch, tmp_path):
    workspace = current()
    assert current() is workspace and current().store is workspace.store
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "elsewhere"))  # another session, as the next test's
    assert current() is not workspace
    assert current().store_url.startswith(f"sqlite:///{tmp_path / 'elsewhere'}")


def test_the_built_in_store_opens_without_building_the_plugin_host():
    workspace = current()
    workspace.store.list_experiments()
    assert built_host() is None and workspace.built_host() is None


def test_list_reads_the_experiments_again_only_after_refreshing_some(monkeypatch, capsys):
    """Issue 31: with nothing active, `xcore list` answers from its first read (one read
    transaction less on a team store)."""
    store = current().store
    done = store.create_experiment("done").id
    store.update_experiment(done, launch_status="LAUNCH_FAILED")
    reads = []
    listing = type(store).list_experiments
    monkeypatch.setattr(type(store), "list_experiments", lambda self, **kw: reads.append(kw) or listing(self, **kw))
    assert main(["list", "--json"]) == 0
    assert len(reads) == 1 and capsys.readouterr().out.count('"title": "done"') == 1
    assert main(["list", "--json", "--status", "failed"]) == 0  # the filter is the second read's
    assert len(reads) == 3 and '"title": "done"' in capsys.readouterr().out
    store.create_experiment("launching")  # active: refreshed, then read again
    assert main(["list", "--json"]) == 0
    assert len(reads) == 5 and '"title": "launching"' in capsys.readouterr().out


def test_a_new_process_host_makes_a_new_workspace_once_the_old_one_took_the_host():
    workspace = current()
    assert workspace.host is get_host()
    reset_host()  # what tests and xcore.testing.plugin_host do
    assert current() is not workspace
    quiet = current()
    get_host()  # a host this workspace never took: the store it opened stays right
    assert current() is quiet


def test_the_launch_api_and_the_commands_share_the_workspace_store(capsys):
    plugin_host({"fake": fake})
    with xm.create_experiment("shared") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor(hold=True)))
    assert experiment._store is current().store
    assert main(["list", "--json"]) == 0
    assert '"title": "shared"' in capsys.readouterr().out


def test_a_given_store_is_used_as_it_is_and_close_ends_the_workspace():
    opened = Workspace().store
    workspace = Workspace(store=opened)
    assert workspace.settled_store() is opened
    with current() as workspace:
        store = workspace.store
    assert current() is not workspace and current().store is not store


def test_holds_nothing_answers_only_for_an_empty_built_in_store(monkeypatch, tmp_path):
    assert not Workspace().holds_nothing()  # no file yet: the usual path creates it
    with Workspace() as workspace:
        workspace.store.list_experiments()  # creates the file, current schema
    assert Workspace().holds_nothing()
    with Workspace() as workspace:
        workspace.store.create_experiment("one")
    assert not Workspace().holds_nothing()
    monkeypatch.setenv("XCORE_STORE", "postgresql://db/xcore")
    assert not Workspace().holds_nothing()


def _job(status: str, *, message: str = "", exit_code: int | None = None, started: float | None = None,
         ended: float | None = None) -> dict[str, object]:
    return {"status": status, "message": message, "exit_code": exit_code, "started_at": started, "ended_at": ended}


def test_a_unit_view_folds_its_jobs_as_the_record_does():
    row = {"id": 4, "role": "work_unit", "args": [1, 2], "identity": "", "created_at": 1.0,
           "jobs": [_job("COMPLETED", message="fine", exit_code=0, started=10.0, ended=12.0),
                    _job("FAILED", message="boom", exit_code=3, started=11.0, ended=15.0),
                    _job("RUNNING", message="still", started=13.0)]}
    view = UnitView(row, now=20.0, results={"loss": 0.5})
    assert view.status is Status.FAILED  # status.combine: a failed job fails the unit
    assert (view.started_at, view.ended_at, view.duration) == (10.0, None, 10.0)
    assert view.exit_codes == [0, 3, None]
    assert view.message == "boom; still"  # what jobs that did not complete said
    assert view.named_args == {"args": [1, 2]} and view.results == {"loss": 0.5} and view.links == {}


def test_an_experiment_view_orders_counts_by_status_with_unknown_texts_last():
    record = ExperimentRecord(7, "t", status_counts={"ODD": 1, "RUNNING": 2, "COMPLETED": 3})
    view = ExperimentView(record)
    assert view.counts == [("RUNNING", 2), ("COMPLETED", 3), ("ODD", 1)]  # the order of Status
    assert view.summary == "6: 2 running, 3 completed, 1 odd"
    assert view.to_json()["work_unit_count"] == 6 and view.to_json()["status"] == record.status.value
    assert ExperimentView(ExperimentRecord(8, "empty")).summary == "0"


def _imported_names(path: Path) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xcore"):
            found += [(node.module or "", alias.name) for alias in node.names]
    return found


def test_the_cli_and_the_dashboard_import_no_private_name_of_another_module():
    borrowed = [f"{path.relative_to(XCORE.parent)}: {module}.{name}"
                for folder in ("cli", "ui", "workspace") for path in sorted((XCORE / folder).rglob("*.py"))
                for module, name in _imported_names(path) if name.startswith("_") and not name.startswith("__")]
    assert borrowed == []
