"""Keeps secrets out of the metadata store and off the screen."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

REDACTED = "<redacted>"

_SECRET_NAME = re.compile(
    r"(SECRET|TOKEN|PASSW(OR)?D|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|COOKIE|SESSION_?KEY|_PAT$|^PAT_)",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"^(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|"
    r"xox[baprs]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{20,}|AIza[0-9A-Za-z_-]{35}|-----BEGIN [A-Z ]*PRIVATE KEY-----.*)$",
    re.DOTALL,
)
_URL_PASSWORD = re.compile(r"(?P<prefix>[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+(?=@)", re.IGNORECASE)


def is_secret(name: str, value: str) -> bool:
    """True if an environment variable looks like it carries a credential."""
    return bool(_SECRET_NAME.search(name) or _SECRET_VALUE.match(value))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with secret-looking values replaced and URL passwords masked."""
    return {
        key: REDACTED if is_secret(key, value) else _URL_PASSWORD.sub(rf"\g<prefix>{REDACTED}", value)
        for key, value in env.items()
    }


_USERINFO_SECRET = re.compile(r"(?P<prefix>[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]*(?=@)", re.IGNORECASE)
_QUERY_SECRET = re.compile(r"(?P<key>[?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)
_KEYWORD_SECRET = re.compile(r"(?P<key>\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact_url(url: str) -> str:
    """A store URL safe to show: the password in ``user:password@``, ``?password=`` or a
    libpq ``password=...`` keyword becomes ``<redacted>``."""
    url = _USERINFO_SECRET.sub(rf"\g<prefix>{REDACTED}", url)
    url = _QUERY_SECRET.sub(rf"\g<key>{REDACTED}", url)
    return _KEYWORD_SECRET.sub(rf"\g<key>{REDACTED}", url) if "://" not in url else url


def redact_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every occurrence of each (non-empty) secret replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text
