"""The light read client of the PostgreSQL store (xcore.store.pgwire): `xcore list`/`show` read a
team store without importing psycopg, only where that is as safe as libpq, and any read it cannot
serve goes to psycopg unchanged."""

from __future__ import annotations

import decimal
import json
import os
import stat

from pg_helpers import require_postgres
from startup_checks import FAKE_ONLY, modules_after

from xcore.store import pgwire
from xcore.store.postgres import PostgresStore
from xcore.store.specs import KnownSpecs


def test_list_and_show_on_postgres_do_not_import_psycopg(tmp_path, pg_url):
    store = PostgresStore(pg_url, migrate=True)
    exp = store.create_experiment("team", tags=["pg"]).id
    store.add_work_unit(exp, 1, "work_unit", {"seed": 1}, "", [])
    store.close()
    env = {"XCORE_STORE": pg_url}
    for argv in (["list", "--json"], ["show", str(exp), "--json"]):
        modules, out = modules_after(argv, tmp_path, prelude=FAKE_ONLY, env=env)
        assert "psycopg" not in modules, argv
        assert "xcore.store.pgwire" in modules, argv
        shown = json.loads(out)
        assert (shown[0] if argv[0] == "list" else shown)["title"] == "team"


def test_list_and_show_on_postgres_build_no_plugin_host(tmp_path, pg_url):
    """Issue 31: the built-in team store opens as the SQLite one does, without pluggy and the
    plugin host (and show reads no config.toml parser when there is no file)."""
    store = PostgresStore(pg_url, migrate=True)
    exp = store.create_experiment("team").id
    store.update_experiment(exp, launch_status="LAUNCH_FAILED")  # nothing active: no backend to ask either
    store.close()
    env = {"XCORE_STORE": pg_url, "XCORE_CONFIG_DIR": str(tmp_path / "no-config")}
    for argv in (["list"], ["show", str(exp)]):
        modules, out = modules_after(argv, tmp_path, env=env)
        assert not {"pluggy", "xcore.hooks.host", "tomllib"} & modules, argv
        assert "team" in out, argv


def test_a_light_read_sends_its_begin_with_its_first_statement(pg_url):
    """Issue 31: a read transaction's BEGIN costs no round trip of its own: one write per
    statement and one for the COMMIT, where each used to be a wait for the server."""
    store = PostgresStore(pg_url, migrate=True)
    try:
        exp = store.create_experiment("team").id
        store.get_experiment(exp)  # connects the light client
        conn = store.dialect._light
        writes, statements = [], []

        class Counting:
            def __init__(self, sock):
                self.sock = sock

            def sendall(self, data):
                writes.append(data)
                return self.sock.sendall(data)

            def __getattr__(self, name):
                return getattr(self.sock, name)

        conn.sock = Counting(conn.sock)
        query = conn.query
        conn.query = lambda *args: statements.append(args) or query(*args)
        assert store.get_experiment(exp).title == "team"
        assert statements and len(writes) == len(statements) + 1
        assert writes[0].startswith(b"Q") and b"BEGIN READ ONLY" in writes[0]
        assert store.dialect._light is conn  # still served by the light client
    finally:
        store.close()


def test_light_reads_off_takes_psycopg(tmp_path, pg_url):
    PostgresStore(pg_url, migrate=True).close()
    env = {"XCORE_STORE": pg_url, "XCORE_STORE_LIGHT_READS": "0"}
    modules, _ = modules_after(["list", "--json"], tmp_path, prelude=FAKE_ONLY, env=env)
    assert "psycopg" in modules


def test_only_loopback_without_demanded_tls_and_known_settings_is_served():
    local = "postgresql://u:p@127.0.0.1:5433/db?options=-csearch_path%3Dx&application_name=a"
    params = pgwire.params_for(local, env={})
    assert params is not None
    assert (params.host, params.port, params.user, params.password, params.dbname, params.options) == (
        "127.0.0.1", 5433, "u", "p", "db", "-csearch_path=x")
    assert pgwire.params_for("postgresql://u@/db?host=/run/postgresql", env={}) is not None
    for url in ("postgresql://u:p@db.example.com/db",  # remote: libpq would try TLS
                "postgresql://u:p@10.0.0.5/db?sslmode=disable",  # remote: never ours, even without TLS
                "postgresql://u:p@127.0.0.1/db?sslmode=require",
                "postgresql://u:p@127.0.0.1/db?sslmode=verify-full&sslrootcert=ca.pem",
                "postgresql://u:p@127.0.0.1/db?target_session_attrs=read-write",
                "postgresql://u:p@127.0.0.1,127.0.0.2/db",
                "postgresql://u:p@/db"):  # libpq's default socket directory
        assert pgwire.params_for(url, env={}) is None, url
    for env in ({"PGSSLMODE": "require"}, {"PGSERVICE": "team"}, {"XCORE_STORE_LIGHT_READS": "0"}):
        assert pgwire.params_for(local, env=env) is None, env


def test_password_from_pgpass_as_libpq_matches_it(tmp_path):
    pgpass = tmp_path / "pgpass"
    pgpass.write_text("other:5432:*:u:nope\n127.0.0.1:5432:db:u:pa\\:ss\n")
    pgpass.chmod(stat.S_IRUSR | stat.S_IWUSR)
    env = {"PGPASSFILE": str(pgpass)}
    assert pgwire.params_for("postgresql://u@127.0.0.1/db", env=env).password == "pa:ss"  # type: ignore[union-attr]
    assert pgwire.params_for("postgresql://u@127.0.0.1/db2", env=env).password is None  # type: ignore[union-attr]
    pgpass.chmod(0o644)  # readable by others: libpq ignores it
    assert pgwire.params_for("postgresql://u@127.0.0.1/db", env=env).password is None  # type: ignore[union-attr]


def test_a_read_the_light_client_cannot_decode_goes_to_psycopg(pg_url):
    store = PostgresStore(pg_url, migrate=True)
    try:
        assert store.dialect._light is not None  # the open's reads were light
        row = store.dialect.run(lambda cur, _: cur.execute("SELECT 1.5::numeric AS n, ? AS s", ("a'b",)).fetchone(),
                                write=False, specs=KnownSpecs())
        assert row == {"n": decimal.Decimal("1.5"), "s": "a'b"}
        assert store.dialect._light is None and store.dialect.conn is not None
        assert store.list_experiments() == []
    finally:
        store.close()


def test_light_client_logs_in_and_types_its_values(pg_url):
    conn = pgwire.Connection(pgwire.params_for(pg_url, env={}))  # type: ignore[arg-type]
    try:
        cur = pgwire.Cursor(conn)
        row = cur.execute("SELECT ?::bigint AS i, ?::float8 AS f, ?::text AS t, ?::boolean AS b, NULL::text AS n,"
                          " 3 = ANY(?) AS found", (2**40, 0.1, "é\\\"'", True, [1, 3])).fetchone()
        assert row == {"i": 2**40, "f": 0.1, "t": "é\\\"'", "b": True, "n": None, "found": True}
        assert cur.plain().execute("SELECT 'x' = ANY(?)", (['a"b', "x"],)).fetchall() == [(True,)]
    finally:
        conn.close()


def test_server_url_is_loopback():
    """The tests above exercise the light client only if the test server is a local one."""
    url = require_postgres()
    assert pgwire.params_for(url, env={k: v for k, v in os.environ.items() if not k.startswith("PG")}) is not None


def test_without_psycopg_a_postgres_store_says_what_to_install(monkeypatch):
    """psycopg is no longer imported with the store module, so its absence is checked on open."""
    import sys

    import pytest

    from xcore.errors import ConfigurationError
    from xcore.hooks import builtin

    monkeypatch.setitem(sys.modules, "psycopg", None)  # find_spec: not installed
    with pytest.raises(ConfigurationError, match=r"pip install 'xcore\[postgres\]'"):
        builtin.xcore_open_store("postgresql://u@127.0.0.1/db", {})


def test_light_client_reads_over_the_unix_socket(tmp_path, pg_url):
    from urllib.parse import urlsplit, urlunsplit

    store = PostgresStore(pg_url, migrate=True)
    store.create_experiment("by socket")
    store.close()
    directory = "/run/postgresql"  # unix_socket_directories of scripts/infra/postgres.sh
    parts = urlsplit(pg_url)
    netloc = parts.netloc.rsplit("@", 1)[0] + "@"
    url = urlunsplit(parts._replace(netloc=netloc, query=f"{parts.query}&host={directory}&port={parts.port or 5432}"))
    params = pgwire.params_for(url, env={})
    assert params is not None and params.host == directory
    modules, out = modules_after(["list", "--json"], tmp_path, prelude=FAKE_ONLY, env={"XCORE_STORE": url})
    assert "psycopg" not in modules
    assert [e["title"] for e in json.loads(out)] == ["by socket"]
