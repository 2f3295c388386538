"""Where xcore keeps its state and configuration, and how it keeps them private.

Everything xcore writes under the state root may hold secrets (the store, logs, a
runner's batch file), so directories it creates are 0700 and files 0600 whatever the umask.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from xcore.errors import ConfigurationError

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


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


def ensure_home() -> Path:
    """The state root, created 0700; a root xcore made earlier with looser modes is tightened."""
    root = home()
    if root.exists() and not root.is_dir():
        raise ConfigurationError(
            f"XCORE_HOME {root} is a file, not a directory: move it away or set XCORE_HOME to a directory."
        )
    if not root.exists():
        private_dir(root)
    elif stat.S_IMODE(root.stat().st_mode) & 0o077 and _is_ours(root):
        _tighten(root)
    return root


_OUR_ENTRIES = {"xcore.db", "xcore.db-wal", "xcore.db-shm", "xcore.db-journal", "plugins", "cache"}


def _is_ours(root: Path) -> bool:
    """A state root xcore created holds only xcore's entries; a directory the user pointed
    XCORE_HOME at (their home, a project) holds others and keeps its mode."""
    try:
        names = [entry.name for entry in os.scandir(root)]
    except OSError:
        return False
    return all(name in _OUR_ENTRIES or name.startswith(".xcore.db.") for name in names)


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700 regardless of the umask; tighten
    it if it already exists with group or other access."""
    path = Path(path)
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise ConfigurationError(f"{probe} is a file, not a directory: move it away (xcore needs a directory there).")
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            pass  # another process made it
        except NotADirectoryError as exc:
            raise ConfigurationError(f"{directory.parent} is not a directory: move it away.") from exc
        except OSError as exc:
            raise ConfigurationError(
                f"Cannot create {directory}: {exc.strerror or exc}; make {directory.parent} writable "
                f"or set XCORE_HOME to a writable directory."
            ) from exc
        _tighten(directory)
    if not missing:
        _tighten(path)
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

def _tighten(path: Path) -> None:
    try:
        current = stat.S_IMODE(path.stat().st_mode)
        if current & 0o077:  # only ever removes access: a file made read-only stays so
            os.chmod(path, current & ~0o077)
    except OSError:
        pass  # not ours to change (another owner); the files inside are still created private


def private_file(path: Path) -> None:
    """Remove group and other access from an existing file."""
    _tighten(Path(path))


def plugin_state_dir(plugin: str) -> Path:
    ensure_home()
    return private_dir(home() / "plugins" / plugin)
