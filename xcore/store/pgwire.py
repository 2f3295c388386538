"""A small read-only PostgreSQL client on the standard library, for the CLI's reads.

Importing psycopg costs a CLI process about 0.15-0.3 s, ten times what ``xcore list`` then asks
of the server. This client speaks just enough of the wire protocol (version 3: the startup,
trust/password/md5/SCRAM-SHA-256 logins, the extended query protocol with text values) for the
store's read transactions, so ``xcore list``/``show`` on a team store start as fast as on SQLite.

It is an optimisation only, never a second source of errors: wherever it is not sure to do what
libpq would, it raises ``Fallback`` and the store runs the same read on psycopg (which then
reports any error as usual). It serves only URLs whose connection it fully understands, and only
to the local machine: a unix socket, or TCP to a loopback address, where it sends no TLS (the
traffic never leaves the host; ``sslmode=require``/``verify-*``, any remote host and any libpq
setting it does not know go to psycopg). ``XCORE_STORE_LIGHT_READS=0`` turns it off.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
_QUERY_KEYS = {"host", "port", "user", "password", "dbname", "options", "application_name", "connect_timeout",
               "sslmode"}
_SAFE_SSLMODES = {"disable", "allow", "prefer"}  # modes under which libpq too may talk without TLS
# libpq's environment variables this client reads; any other PG* setting means psycopg.
_ENV_KEYS = {"PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGDATABASE", "PGOPTIONS", "PGAPPNAME",
             "PGCONNECT_TIMEOUT", "PGSSLMODE"}


class Fallback(Exception):
    """This client cannot serve the request as libpq would: run it on psycopg instead."""


class Params:
    """Where and as whom to connect, read from a URL and the environment as libpq reads them."""

    def __init__(self, host: str, port: int, user: str, password: str | None, dbname: str,
                 options: str, application_name: str, timeout: float) -> None:
        self.host, self.port, self.user, self.password = host, port, user, password
        self.dbname, self.options, self.application_name, self.timeout = dbname, options, application_name, timeout


def params_for(url: str, env: Mapping[str, str] | None = None) -> Params | None:
    """The connection ``url`` means when this client can make it exactly; None: leave it to psycopg."""
    env = os.environ if env is None else env
    if env.get("XCORE_STORE_LIGHT_READS", "1").strip().lower() in {"0", "false", "no", "off"}:
        return None
    if any(key.startswith("PG") and key not in _ENV_KEYS for key in env):
        return None
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
        port_text = parts.port
    except ValueError:
        return None
    settings = dict(query)
    if parts.scheme not in {"postgresql", "postgres"} or parts.fragment or "," in parts.netloc:
        return None
    if len(settings) != len(query) or not set(settings) <= _QUERY_KEYS:
        return None
    sslmode = settings.get("sslmode", env.get("PGSSLMODE", "prefer"))
    host = settings.get("host") or (unquote(parts.hostname) if parts.hostname else "") or env.get("PGHOST", "")
    if sslmode not in _SAFE_SSLMODES or not (host in _LOOPBACK or host.startswith("/")) or "," in host:
        return None
    try:
        port = int(settings.get("port") or port_text or env.get("PGPORT") or 5432)
        timeout = float(settings.get("connect_timeout") or env.get("PGCONNECT_TIMEOUT") or 10)
    except ValueError:
        return None
    user = settings.get("user") or unquote(parts.username or "") or env.get("PGUSER", "")
    if not user:
        import getpass

        user = getpass.getuser()
    dbname = settings.get("dbname") or unquote(parts.path.lstrip("/")) or env.get("PGDATABASE", "") or user
    password = settings.get("password") or (unquote(parts.password) if parts.password is not None else None)
    if password is None:
        password = env.get("PGPASSWORD") or _pgpass(env, host, port, dbname, user)
    return Params(host, port, user, password, dbname, settings.get("options", env.get("PGOPTIONS", "")),
                  settings.get("application_name", env.get("PGAPPNAME", "xcore")), timeout if timeout > 0 else 10)


def _pgpass(env: Mapping[str, str], host: str, port: int, dbname: str, user: str) -> str | None:
    """The password ~/.pgpass (or PGPASSFILE) holds for this connection, as libpq matches it."""
    path = env.get("PGPASSFILE") or os.path.expanduser("~/.pgpass")
    try:
        if os.stat(path).st_mode & 0o077:
            return None  # libpq ignores a file others may read
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    hosts = {host, "localhost"} if host.startswith("/") else {host}
    for line in lines:
        if not line or line.startswith("#"):
            continue
        fields: list[str] = []
        field, escaped = "", False
        for char in line:
            if escaped:
                field, escaped = field + char, False
            elif char == "\\":
                escaped = True
            elif char == ":" and len(fields) < 4:
                fields.append(field)
                field = ""
            else:
                field += char
        fields.append(field)
        if len(fields) != 5:
            continue
        wanted = (hosts, {str(port)}, {dbname}, {user})
        if all(f == "*" or f in w for f, w in zip(fields[:4], wanted, strict=True)):
            return fields[4]
    return None


# -- the connection -------------------------------------------------------------------------------

_TYPES: dict[int, Callable[[bytes], Any]] = {  # result column type oid -> how its text reads
    16: b"t".__eq__, 20: int, 21: int, 23: int, 26: int, 700: float, 701: float,
    18: bytes.decode, 19: bytes.decode, 25: bytes.decode, 705: bytes.decode, 1042: bytes.decode, 1043: bytes.decode,
}
_INT32 = struct.Struct("!i")


class Connection:
    """One session to the server; ``cursor()`` runs statements of one read-only transaction."""

    def __init__(self, params: Params) -> None:
        self.params = params
        try:
            if params.host.startswith("/"):
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.settimeout(params.timeout)
                self.sock.connect(f"{params.host}/.s.PGSQL.{params.port}")
            else:  # a literal address needs no name lookup (nor the idna codec getaddrinfo loads)
                family = {"127.0.0.1": socket.AF_INET, "::1": socket.AF_INET6}.get(params.host)
                if family is None:
                    self.sock = socket.create_connection((params.host, params.port), timeout=params.timeout)
                else:
                    self.sock = socket.socket(family, socket.SOCK_STREAM)
                    self.sock.settimeout(params.timeout)
                    self.sock.connect((params.host, params.port))
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock.settimeout(None)
            self._buffer, self._at = b"", 0
            self._queued: list[str] = []  # simple statements sent with the next one (``simple(later=True)``)
            self._startup()
        except (OSError, ValueError, struct.error, IndexError, UnicodeError) as exc:
            self.close()
            raise Fallback(f"connect: {exc}") from None

    # -- messages
    def _send(self, kind: bytes, body: bytes = b"") -> None:
        self.sock.sendall(kind + struct.pack("!I", len(body) + 4) + body)

    def _receive(self) -> tuple[bytes, bytes]:
        """The next message (kind, body). The buffer is read from an offset, not re-sliced, so a
        result of many rows costs one copy of each chunk, not one per row."""
        buffer, at = self._buffer, self._at
        while True:
            if len(buffer) - at >= 5:
                size = struct.unpack_from("!I", buffer, at + 1)[0]
                if len(buffer) - at >= size + 1:
                    kind, body = buffer[at:at + 1], buffer[at + 5:at + size + 1]
                    at += size + 1
                    if kind == b"E":
                        self._error = body
                    if kind not in (b"N", b"S", b"K"):  # notices, parameter statuses, the cancel key
                        self._buffer, self._at = buffer, at
                        return kind, body
                    continue
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise Fallback("the server closed the connection")
            buffer, at = buffer[at:] + chunk, 0

    def _startup(self) -> None:
        p = self.params
        fields = {"user": p.user, "database": p.dbname, "application_name": p.application_name,
                  "client_encoding": "UTF8", "DateStyle": "ISO"}
        if p.options:
            fields["options"] = p.options
        body = struct.pack("!I", 196608) + b"".join(
            k.encode() + b"\0" + v.encode() + b"\0" for k, v in fields.items()) + b"\0"
        self.sock.sendall(struct.pack("!I", len(body) + 4) + body)
        scram: _Scram | None = None
        while True:
            kind, body = self._receive()
            if kind == b"E":
                raise Fallback("the server refused the login")  # psycopg says why, in full
            if kind == b"Z":
                return
            if kind != b"R":
                continue
            code = struct.unpack_from("!I", body)[0]
            if code == 0:
                continue
            if code in (3, 5, 10) and p.password is None:
                raise Fallback("the server wants a password")
            assert p.password is not None
            if code == 3:
                self._send(b"p", p.password.encode() + b"\0")
            elif code == 5:
                import hashlib

                inner = hashlib.md5(p.password.encode() + p.user.encode()).hexdigest().encode()
                self._send(b"p", b"md5" + hashlib.md5(inner + body[4:8]).hexdigest().encode() + b"\0")
            elif code == 10:
                if b"SCRAM-SHA-256\0" not in body[4:].split(b"\0\0")[0] + b"\0":
                    raise Fallback("no login method this client knows")
                scram = _Scram(p.password)
                first = scram.first()
                self._send(b"p", b"SCRAM-SHA-256\0" + struct.pack("!I", len(first)) + first)
            elif code == 11 and scram is not None:
                self._send(b"p", scram.final(body[4:]))
            elif code == 12 and scram is not None:
                scram.verify(body[4:])
            else:
                raise Fallback(f"login method {code}")

    def query(self, sql: str, params: Sequence[Any] | None) -> tuple[list[str], list[tuple[Any, ...]], int]:
        """Run one statement: its column names, its rows, and how many rows it touched."""
        if params is not None:
            sql = _numbered(sql)
        values = [_text(v) for v in (params or ())]
        bind = b"\0\0" + struct.pack("!HH", 0, len(values)) + b"".join(
            b"\xff\xff\xff\xff" if v is None else struct.pack("!I", len(v)) + v for v in values) + b"\0\0"
        queued = self._send_queued(_message(b"P", b"\0" + sql.encode() + b"\0\0\0") + _message(b"B", bind)
                                   + _message(b"D", b"P\0") + _message(b"E", b"\0\0\0\0\0") + _message(b"S"))
        names: list[str] = []
        readers: list[Callable[[bytes], Any]] = []
        rows: list[tuple[Any, ...]] = []
        count, failed, unknown = 0, False, False
        while True:
            kind, body = self._receive()
            if kind == b"T":
                names, readers, unknown = _columns(body)
            elif kind == b"D":
                if unknown:
                    raise Fallback("a column type this client does not read")
                rows.append(_row(body, readers))
            elif kind == b"C":
                tag = body.rstrip(b"\0").split()
                count = int(tag[-1]) if tag and tag[-1].isdigit() else 0
            elif kind == b"E":
                failed = True
            elif kind == b"Z":
                if failed or queued:
                    raise Fallback(queued or "the server reported an error")
                return names, rows, count

    def simple(self, sql: str, *, later: bool = False) -> None:
        """Run ``sql`` by the simple protocol. ``later``: send it with the next statement, in the
        same write, and read its answer then: a transaction's ``BEGIN`` costs no round trip of
        its own (on a loaded machine each one is a wait for the server to be scheduled)."""
        if later:
            self._queued.append(sql)
            return
        queued = self._send_queued(_message(b"Q", sql.encode() + b"\0"))
        if not self._simple_answered() or queued:
            raise Fallback(queued or f"{sql} failed")

    def _send_queued(self, messages: bytes) -> str:
        """Send the queued simple statements, then ``messages``, in one write; read the queued
        ones' answers. Returns what failed of them ("" when none did): the caller reads its own
        answer before raising, and a failure makes the store close this connection."""
        queued, self._queued = self._queued, []
        self.sock.sendall(b"".join(_message(b"Q", sql.encode() + b"\0") for sql in queued) + messages)
        failed = [sql for sql in queued if not self._simple_answered()]
        return f"{failed[0]} failed" if failed else ""

    def _simple_answered(self) -> bool:
        """Read one simple statement's answer, up to ReadyForQuery; whether it succeeded."""
        failed = False
        while True:
            kind, _ = self._receive()
            failed = failed or kind == b"E"
            if kind == b"Z":
                return not failed

    def close(self) -> None:
        sock = getattr(self, "sock", None)
        if sock is not None:
            try:
                self._send(b"X")
            except OSError:
                pass
            sock.close()
            self.sock = None  # type: ignore[assignment]

    @property
    def closed(self) -> bool:
        return getattr(self, "sock", None) is None


class Cursor:
    """The store's cursor interface (``?`` placeholders; rows by name, or tuples if ``plain``)."""

    def __init__(self, conn: Connection, plain: bool = False) -> None:
        self.conn, self.is_plain = conn, plain
        self._rows: list[Any] = []
        self.rowcount = -1

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Cursor:
        try:
            names, rows, self.rowcount = self.conn.query(sql, params)
        except (OSError, struct.error, IndexError, UnicodeError, ValueError) as exc:
            raise Fallback(str(exc)) from None
        self._rows = rows if self.is_plain else [dict(zip(names, row, strict=True)) for row in rows]
        return self

    def executemany(self, sql: str, params: Any) -> None:
        raise Fallback("a write")

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Iterator[Any]:
        rows, self._rows = self._rows, []
        return iter(rows)

    def plain(self) -> Cursor:
        return Cursor(self.conn, plain=True)


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


def _numbered(sql: str) -> str:
    """The store's ``?`` placeholders as PostgreSQL's ``$1, $2, ...``."""
    parts = sql.split("?")
    return parts[0] + "".join(f"${i}{part}" for i, part in enumerate(parts[1:], 1))


def _text(value: Any) -> bytes | None:
    """A parameter as text of a type the server infers from where it stands (as psycopg sends str)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return b"t" if value else b"f"
    if isinstance(value, int | str):
        return str(value).encode()
    if isinstance(value, float):
        return repr(value).encode()
    if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return ("{" + ",".join(map(str, value)) + "}").encode()
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        escaped = (v.replace("\\", "\\\\").replace('"', '\\"') for v in value)
        return ("{" + ",".join(f'"{v}"' for v in escaped) + "}").encode()
    raise Fallback(f"a parameter of type {type(value).__name__}")


def _columns(body: bytes) -> tuple[list[str], list[Callable[[bytes], Any]], bool]:
    count = struct.unpack_from("!H", body)[0]
    at, names, readers, unknown = 2, [], [], False
    for _ in range(count):
        end = body.index(b"\0", at)
        names.append(body[at:end].decode())
        oid = struct.unpack_from("!I", body, end + 7)[0]
        at = end + 19
        reader = _TYPES.get(oid)
        if reader is None:
            unknown = True
            reader = bytes.decode
        readers.append(reader)
    return names, readers, unknown


def _row(body: bytes, readers: list[Callable[[bytes], Any]]) -> tuple[Any, ...]:
    """One DataRow's values (int, float and bytes.decode read the text form directly)."""
    at, values = 2, list[Any]()
    append, unpack = values.append, _INT32.unpack_from
    for reader in readers:
        size = unpack(body, at)[0]
        at += 4
        if size < 0:
            append(None)
        else:
            append(reader(body[at:at + size]))
            at += size
    return tuple(values)


class _Scram:
    """SCRAM-SHA-256 without channel binding (RFC 5802/7677), the server's signature checked."""

    def __init__(self, password: str) -> None:
        import base64  # only a login by password needs these
        import hashlib
        import hmac

        self.b64, self.hashlib, self.hmac = base64, hashlib, hmac
        self.password = password.encode()
        self.nonce = self.b64.b64encode(os.urandom(18)).decode()
        self.bare = f"n=,r={self.nonce}"

    def first(self) -> bytes:
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        base64, hashlib, hmac = self.b64, self.hashlib, self.hmac
        fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
        if not fields["r"].startswith(self.nonce):
            raise Fallback("the server's SCRAM nonce")
        salted = hashlib.pbkdf2_hmac("sha256", self.password, base64.b64decode(fields["s"]), int(fields["i"]))
        without_proof = f"c=biws,r={fields['r']}"
        self.auth = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        signature = hmac.digest(hashlib.sha256(client_key).digest(), self.auth, "sha256")
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.server_key = hmac.digest(salted, b"Server Key", "sha256")
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        fields = dict(part.split("=", 1) for part in server_final.decode().split(","))
        expected = self.hmac.digest(self.server_key, self.auth, "sha256")
        if not self.hmac.compare_digest(self.b64.b64decode(fields.get("v", "")), expected):
            raise Fallback("the server's SCRAM signature")
