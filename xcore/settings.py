"""Numbers read from environment variables: a bad value is an error that names the variable
and says what to set, never a bare ``ValueError`` from deep inside a launch."""

from __future__ import annotations

import math
import os

from xcore.errors import ConfigurationError


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
