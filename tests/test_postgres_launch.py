"""A real launch recorded in the PostgreSQL team store: run, watch, secrets kept out."""

from __future__ import annotations

import json
import sys

from core_helpers import run_xcore_fake, write_fake_script

PY = sys.executable


def test_launch_wait_show_on_postgres_with_secrets_redacted(tmp_path, pg_url):
    out = tmp_path / "env.json"
    code = f"import json, os; json.dump({{k: os.environ[k] for k in ('API_TOKEN', 'DB')}}, open({str(out)!r}, 'w'))"
    script = write_fake_script(tmp_path / "launch.py", f"""
with xm.create_experiment("team sweep", tags=["pg"]) as e:
    [exe, ok] = e.package([xm.binary(fake.FakeSpec(), {PY!r}, args=["-c", {code!r}]),
                           xm.binary(fake.FakeSpec(), {PY!r}, args=["-c", "pass"])])
    e.add(xm.Job(exe, fake.FakeExecutor(), args={{"i": 0}},
                 env_vars={{"API_TOKEN": "s3cr3t-value", "DB": "postgresql://u:hunter2@db/x"}}))
    for i in range(1, 3):
        e.add(xm.Job(ok, fake.FakeExecutor(), args={{"i": i}}))
""")
    env = {"XCORE_STORE": pg_url}
    result = run_xcore_fake("launch", "--wait", str(script), env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text()) == {"API_TOKEN": "s3cr3t-value", "DB": "postgresql://u:hunter2@db/x"}
    shown = json.loads(run_xcore_fake("show", "1", "--json", env=env).stdout)
    assert shown["status"] == "COMPLETED" and [u["status"] for u in shown["work_units"]] == ["COMPLETED"] * 3
    assert shown["work_units"][0]["jobs"][0]["env"] == {"API_TOKEN": "<redacted>",
                                                       "DB": "postgresql://u:<redacted>@db/x"}
    import psycopg

    with psycopg.connect(pg_url) as conn:
        dump = json.dumps(conn.execute(
            "SELECT json_agg(j) FROM (SELECT * FROM jobs) j UNION ALL SELECT json_agg(e) FROM experiments e"
            " UNION ALL SELECT json_agg(w) FROM work_units w UNION ALL SELECT json_agg(v) FROM job_events v"
            " UNION ALL SELECT json_agg(s) FROM job_specs s"
        ).fetchall())
    assert "s3cr3t" not in dump and "hunter2" not in dump
    listing = run_xcore_fake("list", env=env)
    assert "team sweep" in listing.stdout and "3: 3 completed" in listing.stdout
