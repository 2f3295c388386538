"""Where events go: a webhook (signed), Slack, e-mail over SMTP, a command; plugins add more.

A sink is an object with ``send(event, timeout)``: deliver the event (a JSON-ready dict, see
``xcore.runtime.notifications.events``) within ``timeout`` seconds or raise; the message of what
it raises is recorded as the delivery's error and shown by ``xcore notifications``, so it must
hold no secret (these name a host, never a URL's path or query, where tokens live).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from xcore.errors import ConfigurationError
from xcore.runtime.notifications import config as cfg
from xcore.runtime.notifications.config import SinkConfig

SIGNATURE_HEADER = "X-Xcore-Signature"


class Sink(Protocol):
    def send(self, event: Mapping[str, Any], timeout: float) -> None: ...


class SinkError(Exception):
    """A delivery that did not succeed; its message is recorded and shown (no secrets in it)."""


def body_of(event: Mapping[str, Any]) -> bytes:
    """The event as sent: compact JSON, UTF-8, keys in a stable order."""
    return json.dumps(event, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Xcore-Signature`` value: HMAC-SHA256 of ``<timestamp>.<body>`` under the secret."""
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret: str, header: str, body: bytes, *, tolerance: float = 300.0, now: float | None = None) -> bool:
    """Whether ``header`` signs ``body`` under ``secret`` and is at most ``tolerance`` s old (what
    a receiver checks; docs/notifications.md has the same in a few lines)."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), f"t={timestamp},v1={parts.get('v1', '')}")


def _host(url: str) -> str:
    return urlsplit(url).hostname or "?"


def _post(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> None:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json; charset=utf-8", "User-Agent": "xcore-notifications", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) checked at config
            response.read(1 << 16)
    except urllib.error.HTTPError as exc:
        raise SinkError(f"HTTP {exc.code} from {_host(url)}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SinkError(f"cannot reach {_host(url)}: {reason}") from None


def _url(sink: SinkConfig, value: str, key: str) -> str:
    if urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname:
        raise ConfigurationError(f"{sink.where}: {key} must be an http:// or https:// URL.")
    return value


class WebhookSink:
    """POSTs the event as JSON, signed (``X-Xcore-Signature: t=<unix time>,v1=<hex>``) when a
    secret is set."""

    def __init__(self, sink: SinkConfig) -> None:
        cfg.check_keys(sink, ("url", "secret", "secret_env"))
        self.url = _url(sink, cfg.text(sink, "url"), "url")
        self._secret = cfg.secret(sink, "secret", required=False)

    def __repr__(self) -> str:
        return f"WebhookSink({_host(self.url)})"

    def send(self, event: Mapping[str, Any], timeout: float) -> None:
        body = body_of(event)
        headers = {"X-Xcore-Event": str(event.get("id", ""))}
        if self._secret:
            headers[SIGNATURE_HEADER] = signature(self._secret, int(time.time()), body)
        _post(self.url, body, headers, timeout)


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackSink:
    """A Slack incoming webhook: the event's text as ``text`` and one mrkdwn section block. The
    webhook URL is itself the secret: set ``url_env`` to keep it out of the file."""

    def __init__(self, sink: SinkConfig) -> None:
        cfg.check_keys(sink, ("url", "url_env"))
        self._url = _url(sink, cfg.secret(sink, "url", required=True), "url")

    def __repr__(self) -> str:
        return "SlackSink()"

    @staticmethod
    def payload(event: Mapping[str, Any]) -> dict[str, Any]:
        text = _slack_escape(str(event.get("text", event.get("id", ""))))
        return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}},
                                         {"type": "context", "elements": [
                                             {"type": "mrkdwn", "text": _slack_escape(str(event.get("id", "")))}]}]}

    def send(self, event: Mapping[str, Any], timeout: float) -> None:
        _post(self._url, json.dumps(self.payload(event)).encode(), {}, timeout)


class EmailSink:
    """One message per event over SMTP (``starttls = true`` to encrypt, the server's certificate
    checked against the system's CAs or ``cafile``; ``username`` with ``password`` or
    ``password_env`` to log in)."""

    def __init__(self, sink: SinkConfig) -> None:
        cfg.check_keys(sink, ("host", "port", "starttls", "cafile", "username", "password", "password_env",
                              "from", "to"))
        self.host = cfg.text(sink, "host")
        self.starttls = sink.options.get("starttls", False)
        if not isinstance(self.starttls, bool):
            raise ConfigurationError(f"{sink.where}: starttls must be true or false.")
        port = sink.options.get("port", 587 if self.starttls else 25)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigurationError(f"{sink.where}: port must be a whole number from 1 to 65535.")
        self.port = port
        self.cafile = cfg.text(sink, "cafile", required=False) or None
        if self.cafile and not os.path.isfile(os.path.expanduser(self.cafile)):
            raise ConfigurationError(f"{sink.where}: cafile {self.cafile} is not a file.")
        self.username = cfg.text(sink, "username", required=False)
        self._password = cfg.secret(sink, "password", required=bool(self.username))
        self.sender = cfg.text(sink, "from")
        to = sink.options.get("to")
        if isinstance(to, str):
            to = [to]
        if not isinstance(to, list) or not to or not all(isinstance(t, str) and t for t in to):
            raise ConfigurationError(f"{sink.where}: to must be an address or a list of addresses.")
        self.to = list(to)

    def __repr__(self) -> str:
        return f"EmailSink({self.host}:{self.port})"

    def message(self, event: Mapping[str, Any]) -> Any:
        from email.message import EmailMessage

        message = EmailMessage()
        subject = str(event.get("text", event.get("id", "xcore event"))).splitlines()[0][:200]
        message["Subject"] = f"[xcore] {subject}"
        message["From"] = self.sender
        message["To"] = ", ".join(self.to)
        message["X-Xcore-Event"] = str(event.get("id", ""))
        message.set_content(f"{event.get('text', '')}\n\n{json.dumps(event, indent=2, ensure_ascii=False)}\n")
        return message

    def send(self, event: Mapping[str, Any], timeout: float) -> None:
        import smtplib
        import ssl

        try:
            with smtplib.SMTP(self.host, self.port, timeout=timeout) as smtp:
                if self.starttls:
                    cafile = os.path.expanduser(self.cafile) if self.cafile else None
                    smtp.starttls(context=ssl.create_default_context(cafile=cafile))
                if self.username:
                    smtp.login(self.username, self._password)
                smtp.send_message(self.message(event))
        except smtplib.SMTPResponseException as exc:
            raise SinkError(f"SMTP {exc.smtp_code} from {self.host}") from None
        except (smtplib.SMTPException, OSError) as exc:
            raise SinkError(f"SMTP {self.host}:{self.port}: {type(exc).__name__}: {exc}"[:300]) from None


class CommandSink:
    """Runs ``command`` (an argv list, never a shell line) with the event's JSON on stdin and
    ``XCORE_EVENT_ID``/``XCORE_EVENT_TYPE`` in its environment; exit 0 means delivered."""

    def __init__(self, sink: SinkConfig) -> None:
        cfg.check_keys(sink, ("command",))
        command = sink.options.get("command")
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            raise ConfigurationError(f"{sink.where}: command must be a list of strings (the program and its "
                                     f"arguments, e.g. command = [\"/usr/local/bin/notify\", \"--json\"]).")
        self.command = list(command)

    def __repr__(self) -> str:
        return f"CommandSink({self.command[0]!r})"

    def send(self, event: Mapping[str, Any], timeout: float) -> None:
        env = {**os.environ, "XCORE_EVENT_ID": str(event.get("id", "")), "XCORE_EVENT_TYPE": str(event.get("type", ""))}
        try:
            done = subprocess.run(self.command, input=body_of(event), capture_output=True, timeout=timeout,
                                  env=env, check=False)
        except subprocess.TimeoutExpired:
            raise SinkError(f"{self.command[0]} ran longer than {timeout:g} s") from None
        except OSError as exc:
            raise SinkError(f"cannot run {self.command[0]}: {exc.strerror or exc}") from None
        if done.returncode != 0:
            last = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise SinkError(f"{self.command[0]} exited with {done.returncode}: {last[0][:200]}".rstrip(": "))


BUILTIN: dict[str, Callable[[SinkConfig], Sink]] = {
    "webhook": WebhookSink, "slack": SlackSink, "email": EmailSink, "command": CommandSink,
}


def build(sink: SinkConfig, plugin_types: Mapping[str, Callable[[SinkConfig], Sink]]) -> Sink:
    """The sink for one config entry: a built-in type, else a plugin's (``xcore_notification_sinks``)."""
    factory = BUILTIN.get(sink.type) or plugin_types.get(sink.type)
    if factory is None:
        known = sorted({*BUILTIN, *plugin_types})
        raise ConfigurationError(f"{sink.where}: unknown type {sink.type!r}; the types are {', '.join(known)} "
                                 f"(a plugin adds more with the xcore_notification_sinks hook).")
    return factory(sink)
