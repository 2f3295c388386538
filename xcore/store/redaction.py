"""Keeps secrets out of the metadata store and off the screen.

The rule, applied to every environment stored or printed (a job's env, the ``env_vars`` of
its executable and executor, ``experiment.add(args={"env_vars": ...})``): a variable's value
is replaced by ``<redacted>`` when its name, split into words at ``_``, ``-`` and ``.``,
has a word that

- is PASS, PASSWD, PASSWORD, PASSPHRASE, SECRET, TOKEN, KEY, AUTH, PRIVATE, CREDENTIAL,
  CREDENTIALS, CREDS, COOKIE or PAT (or a plural of them), or
- contains PASSWORD, PASSWD, SECRET, CREDENTIAL or PRIVATE, ends with TOKEN (``ACCESSTOKEN``)
  or AUTH (``OAUTH``), is a compound key such as APIKEY or ACCESSKEY, starts with AUTH but not
  AUTHOR (``AUTHORIZATION`` counts), or is PWD in a longer name (``MYSQL_PWD``; not ``PWD``);

or when the value looks like a known credential (GitHub, AWS, OpenAI, Slack, Hugging Face,
Google keys, PEM private keys). In every other value the password of a URL
(``scheme://user:password@host``) is replaced, as it is in a job's arguments and a work unit's
args (``mask_args``, ``mask_nested_urls``). Jobs always get the real values.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"

_WORDS = {
    "PASS", "PASSWD", "PASSWORD", "PASSPHRASE", "SECRET", "TOKEN", "KEY", "AUTH", "PRIVATE",
    "CREDENTIAL", "CREDENTIALS", "CREDS", "COOKIE", "PAT",
}
_CONTAINS = ("PASSWORD", "PASSWD", "SECRET", "CREDENTIAL", "PRIVATE")
_ENDS = ("TOKEN", "TOKENS", "AUTH")
_KEY_PREFIXES = {"API", "ACCESS", "SSH", "AUTH", "SESSION", "SIGNING", "ENCRYPTION", "MASTER", "LICENSE", "CLIENT",
                 "APP", "SERVICE", "ACCOUNT", "SECRET", "PRIVATE", "DEPLOY"}
# Patterns are compiled on first use (``_compiled``): a launch whose environments are empty
# never needs them, and compiling them all costs a few ms of every start-up.
_SECRET_VALUE = (
    r"^(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|"
    r"xox[baprs]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{20,}|AIza[0-9A-Za-z_-]{35}|-----BEGIN [A-Z ]*PRIVATE KEY-----.*)$"
)
# scheme://user:password@host: the password runs to the last "@" of the URL, so one with "@" or "/" in it is
# masked whole.
_URL_PASSWORD = r"(?P<prefix>\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^\s]+?(?=@[^@\s]*(?:\s|$))"  # re.IGNORECASE
# Keys under which a stored object keeps an environment.
ENV_KEYS = frozenset({"env", "env_vars", "environment", "environ"})


@functools.cache
def _compiled(pattern: str, flags: int) -> re.Pattern[str]:
    """Compiled once, kept for the process (re's own cache may evict it in a program using many patterns)."""
    return re.compile(pattern, flags)


def _secret_word(word: str) -> bool:
    if word in _WORDS or word.removesuffix("S") in _WORDS:
        return True
    if any(part in word for part in _CONTAINS) or word.endswith(_ENDS):
        return True
    if word.removesuffix("S").endswith("KEY") and word.removesuffix("S")[:-3] in _KEY_PREFIXES:
        return True
    return word.startswith("AUTH") and (not word.startswith("AUTHOR") or word.startswith("AUTHORIZ"))


def is_secret_name(name: str) -> bool:
    """True if an environment variable's name says it carries a credential."""
    words = [word for word in _compiled(r"[^A-Z0-9]+", 0).split(name.upper()) if word]
    return any(_secret_word(word) for word in words) or ("PWD" in words and len(words) > 1)


def is_secret(name: str, value: str) -> bool:
    """True if an environment variable looks like it carries a credential."""
    return is_secret_name(name) or bool(_compiled(_SECRET_VALUE, re.DOTALL).match(str(value)))


def mask_url_passwords(text: str) -> str:
    return _compiled(_URL_PASSWORD, re.IGNORECASE).sub(rf"\g<prefix>{REDACTED}", text)


def mask_args(args: list[str]) -> list[str]:
    """Arguments as stored and shown: URL passwords masked (the job itself gets the real ones).
    The same list when no argument holds a URL, so stored args without secrets are unchanged."""
    if not any("://" in arg for arg in args):
        return args
    return [mask_url_passwords(arg) if "://" in arg else arg for arg in args]


def mask_nested_urls(data: Any) -> Any:
    """Stored args (any JSON value) with the password of every URL in a string masked; the same
    object when there is none. Scalars are passed over without a call each (a sweep stores
    thousands of small dicts of numbers)."""
    if isinstance(data, str):
        return mask_url_passwords(data) if "://" in data else data
    if isinstance(data, Mapping):
        changed: dict[Any, Any] | None = None
        for key, value in data.items():
            new = _masked_item(value)
            if new is not value:
                changed = dict(data) if changed is None else changed
                changed[key] = new
        return data if changed is None else changed
    if isinstance(data, (list, tuple)):
        items = [_masked_item(item) for item in data]
        return data if all(new is old for new, old in zip(items, data, strict=True)) else items
    return data


def _masked_item(value: Any) -> Any:
    if isinstance(value, str):
        return mask_url_passwords(value) if "://" in value else value
    if isinstance(value, (Mapping, list, tuple)):
        return mask_nested_urls(value)
    return value


def redact_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``env`` with secret-looking values replaced and URL passwords masked."""
    return {
        key: REDACTED if is_secret(str(key), str(value))
        else mask_url_passwords(value) if isinstance(value, str) else value
        for key, value in env.items()
    }


def redact_nested(data: Any) -> Any:
    """A copy of stored data (an executable, executor or work unit's args as JSON) in which
    every environment mapping (under a key in ``ENV_KEYS``) is redacted."""
    if isinstance(data, Mapping):
        return {
            key: redact_env(value) if key in ENV_KEYS and isinstance(value, Mapping) else redact_nested(value)
            for key, value in data.items()
        }
    if isinstance(data, (list, tuple)):
        return [redact_nested(item) for item in data]
    return data


_USERINFO_SECRET = r"(?P<prefix>[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]*(?=@)"  # these three: re.IGNORECASE
_QUERY_SECRET = r"(?P<key>[?&](?:ssl)?password=)[^&#]*"
_KEYWORD_SECRET = r"(?P<key>\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)"


def redact_url(url: str) -> str:
    """A store URL safe to show: the password in ``user:password@``, ``?password=`` or a
    libpq ``password=...`` keyword becomes ``<redacted>``."""
    url = _compiled(_USERINFO_SECRET, re.IGNORECASE).sub(rf"\g<prefix>{REDACTED}", url)
    url = _compiled(_QUERY_SECRET, re.IGNORECASE).sub(rf"\g<key>{REDACTED}", url)
    return _compiled(_KEYWORD_SECRET, re.IGNORECASE).sub(rf"\g<key>{REDACTED}", url) if "://" not in url else url


def redact_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every occurrence of each (non-empty) secret replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text
