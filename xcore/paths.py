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


# -- paths in launch scripts -----------------------------------------------------------------

_launch_script: Path | None = None


def set_launch_script(path: Path | None) -> None:
    """Called by ``xcore launch`` around running a launch script."""
    global _launch_script
    _launch_script = path


def launch_script() -> Path | None:
    """The running launch script: the one ``xcore launch`` runs, else the file
    ``python script.py`` runs. None in a REPL, a notebook or ``python -m``."""
    if _launch_script is not None:
        return _launch_script
    main = sys.modules.get("__main__")
    file = getattr(main, "__file__", None)
    if file and getattr(main, "__spec__", None) is None and file.endswith(".py"):
        return Path(file).resolve()
    return None


def launch_dir() -> Path | None:
    """The directory of the running launch script (see ``launch_script``)."""
    script = launch_script()
    return script.parent if script is not None else None


def stdlib_shadowing(script: Path) -> str | None:
    """Why a launch script's name cannot work, or None. Its directory goes first on sys.path,
    so ``secrets.py`` would be imported in place of the standard library's ``secrets`` by
    xcore's own threads (and hang the launch)."""
    if script.suffix == ".py" and script.stem in sys.stdlib_module_names:
        return (
            f"Launch script {script.name} has the name of the standard library module {script.stem!r}, "
            f"which Python would import instead of the real one. Rename it, e.g. to launch_{script.stem}.py."
        )
    return None


def from_launch_dir(value: str | os.PathLike[str], *, only_if_exists: bool = False) -> str:
    """A relative path in a launch script, taken from the script's directory as XManager does
    (so ``python_module(path="src")`` works from any working directory). ``only_if_exists``
    keeps a path that is not there as given (a bare command name is looked up on PATH)."""
    text = os.fspath(value)
    base = launch_dir()
    if not text or base is None or os.path.isabs(os.path.expanduser(text)):
        return text
    candidate = os.path.normpath(base / text)
    if only_if_exists and not os.path.exists(candidate):
        return text
    return candidate
