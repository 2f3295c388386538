"""Where xcore keeps its state and configuration."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def home() -> Path:
    """The state root: ``XCORE_HOME``, else the user data directory (``~/.local/share/xcore``)."""
    explicit = os.environ.get("XCORE_HOME")
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "xcore"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "xcore"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "xcore"


def config_dir() -> Path:
    """Configuration: ``XCORE_CONFIG_DIR``, else ``~/.config/xcore``."""
    explicit = os.environ.get("XCORE_CONFIG_DIR")
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "xcore"
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "xcore"


def store_url() -> str:
    """``XCORE_STORE``, else the SQLite file in the state root."""
    return os.environ.get("XCORE_STORE") or f"sqlite:///{home() / 'xcore.db'}"


def plugin_state_dir(plugin: str) -> Path:
    path = home() / "plugins" / plugin
    path.mkdir(parents=True, exist_ok=True)
    return path
