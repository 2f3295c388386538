"""Settings: numbers read from environment variables and tables of ``config.toml`` in the
config directory. A bad value is an error that names the variable or key and says what to
set, never a bare ``ValueError`` from deep inside a launch."""

from __future__ import annotations

import math
import os
from typing import Any

from xcore.errors import ConfigurationError

CONFIG_FILE = "config.toml"


def env_number(name: str, default: float, *, minimum: float = 0.0) -> float:
    """The float in ``$name`` (``default`` when unset or empty), at least ``minimum``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < minimum:
        raise ConfigurationError(f"{name}={text!r} is not a number >= {minimum:g}; set it to one "
                                 f"(e.g. {default:g}) or unset it.")
    return value


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """The integer in ``$name`` (``default`` when unset or empty), at least ``minimum``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigurationError(f"{name}={text!r} is not a whole number >= {minimum}; set it to one "
                                 f"(e.g. {default}) or unset it.") from None
    if value < minimum:
        raise ConfigurationError(f"{name}={text!r} is below {minimum}; set it to at least {minimum} "
                                 f"(e.g. {default}) or unset it.")
    return value


def config_table(name: str) -> dict[str, Any]:
    """The ``[name]`` table of ``config.toml`` in the config directory (``XCORE_CONFIG_DIR``,
    else ``~/.config/xcore``); {} when the file or the table is missing. Read on each call:
    commands are short-lived and the file is small. tomllib loads only when there is a file
    (it is ~3 ms of an ``xcore show`` that has none)."""
    from xcore.paths import config_dir

    path = config_dir() / CONFIG_FILE
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigurationError(f"Cannot read {path}: {exc}. Fix or move the file.") from None
    import tomllib

    try:
        with handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"Cannot read {path}: {exc}. Fix or move the file.") from None
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigurationError(f"{path}: {name} must be a table ([{name}]), got {type(table).__name__}.")
    return table
