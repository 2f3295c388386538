"""The real PostgreSQL server for the store tests (started by ``scripts/infra/setup.sh postgres``).

Each test gets its own schema in the test database (``?options=-csearch_path=...`` in the URL,
which also checks that libpq options pass through), dropped afterwards.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from xcore.testing import require_service

URL_FILE = Path("/var/lib/xcore-infra/postgres/url")
DATA_DIR = Path("/var/lib/xcore-infra/postgres/data")
HOW = "run `sudo bash scripts/infra/setup.sh postgres` and `pip install 'xcore[postgres]'`"


def server_url() -> str | None:
    """The password URL of the test database: XCORE_TEST_PG_URL, else the infra script's file."""
    explicit = os.environ.get("XCORE_TEST_PG_URL")
    if explicit:
        return explicit
    try:
        return URL_FILE.read_text().strip() or None
    except OSError:
        return None


def _available() -> bool:
    url = server_url()
    if not url:
        return False
    try:
        import psycopg
    except ImportError:
        return False
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error:
        return False
    return True


def require_postgres() -> str:
    require_service("postgres", _available, HOW)
    url = server_url()
    assert url
    return url


def admin_sql(sql: str, *params: object) -> list[tuple]:
    import psycopg

    with psycopg.connect(require_postgres(), autocommit=True) as conn:
        cur = conn.execute(sql, params or None)
        return cur.fetchall() if cur.description else []


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A store URL on the real server, in a fresh schema of its own."""
    base = require_postgres()
    schema = "xt_" + uuid.uuid4().hex[:12]
    admin_sql(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        admin_sql(f"DROP SCHEMA {schema} CASCADE")


def with_password(url: str, password: str) -> str:
    """``url`` with its password replaced."""
    import re

    return re.sub(r"(://[^:/@]*:)[^@]*@", lambda m: f"{m.group(1)}{password}@", url, count=1)


def restart_server() -> None:
    """pg_ctl restart (fast mode: sessions are cut, as in a real server restart)."""
    require_service("postgres-admin", os.geteuid() == 0 and DATA_DIR.is_dir(), "run the tests as root (" + HOW + ")")
    bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    subprocess.run(["runuser", "-u", "postgres", "--", str(bindir / "pg_ctl"), "-D", str(DATA_DIR), "-m", "fast",
                    "-w", "-t", "60", "restart", "-l", "/var/log/xcore-infra/postgres.log"],
                   check=True, capture_output=True, timeout=90)
