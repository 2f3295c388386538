"""The ``Workspace``: one session's settings, plugin host and metadata store.

The command line, the dashboard and the launch API all reach the store and the plugins
through it, so the store is opened one way, once per session, and only when something needs
it. Nothing is built at import: a command that needs no plugin (``xcore list`` on the
built-in store) imports none, and this module imports only ``os`` and ``sys`` (the fast
``xcore list`` runs through it, see ``Workspace.holds_nothing``).
"""

from __future__ import annotations

import _thread  # threading's own lock, without importing threading (not needed by most commands)
import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs every command ~10 ms
if TYPE_CHECKING:
    from typing import Any

    from xcore.hooks.host import PluginHost
    from xcore.store import MetadataStore

# The environment ``xcore.paths.store_url`` reads. A workspace read from other values (a test's
# XCORE_HOME, another XCORE_STORE) is another session's.
_SETTINGS = ("XCORE_STORE", "XCORE_HOME", "XDG_DATA_HOME", "HOME", "LOCALAPPDATA")


def _settings() -> tuple[str | None, ...]:
    return tuple(os.environ.get(name) for name in _SETTINGS)


def _process_host() -> PluginHost | None:
    """The process's plugin host if it was built (a module never imported built none)."""
    module = sys.modules.get("xcore.hooks.host")
    return None if module is None else module.built_host()


class Workspace:
    """Settings, plugin host and store of one session, each built on first need.

    ``store_url`` and ``store_options``: another store than ``XCORE_STORE`` (``xcore store
    copy``); ``host``: a plugin host of its own instead of the process's; ``store``: a store
    already open (tests, embedding), used as it is: whoever opened it settled it."""

    def __init__(self, store_url: str | None = None, *, store_options: dict[str, Any] | None = None,
                 host: PluginHost | None = None, store: MetadataStore | None = None) -> None:
        self._store_url = store_url
        self._store_options = dict(store_options or {})
        self._own_host = host is not None
        self._host = host
        self._store = store
        self._settings = _settings()
        self._settled = store is not None  # see settled_store
        self._closed = False
        self._lock = _thread.RLock()

    # -- settings ----------------------------------------------------------------------------

    @property
    def store_url(self) -> str:
        """The store's URL: the one given, else ``XCORE_STORE`` or the SQLite file in XCORE_HOME."""
        if self._store_url is None:
            from xcore import paths

            self._store_url = paths.store_url()
        return self._store_url

    def is_current(self) -> bool:
        """Whether this is still the session the environment describes: the same settings,
        and the same process plugin host as the one it took (tests replace it)."""
        if self._closed or self._settings != _settings():
            return False
        return self._own_host or self._host is None or self._host is _process_host()

    # -- the plugin host ---------------------------------------------------------------------

    @property
    def host(self) -> PluginHost:
        """The plugin host: the one given, else the process's (``xcore.hooks.host.get_host``),
        built now if no one needed it yet."""
        if self._host is None:
            from xcore.hooks.host import get_host

            self._host = get_host()
        return self._host

    def built_host(self) -> PluginHost | None:
        """The plugin host if it is built already, without building it: whether some plugin
        may have been loaded (its warnings to print, its kinds to ask)."""
        return self._host if self._host is not None else _process_host()

    # -- the store ---------------------------------------------------------------------------

    @property
    def store(self) -> MetadataStore:
        """The metadata store, opened on first use and then the same object."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = self._open()
        return self._store

    def _open(self) -> MetadataStore:
        url = self.store_url
        if url.startswith("sqlite:") and self.built_host() is None:  # the built-in store: no plugin host needed
            from xcore.store.sqlite import open_url

            return open_url(url)
        from xcore.store import POSTGRES_SCHEMES

        if url.startswith(POSTGRES_SCHEMES) and self.built_host() is None and not self._store_options:
            from xcore.store.postgres import open_url as open_postgres  # the built-in team store: no host either

            return open_postgres(url)
        return self.host.open_store(url, self._store_options)  # the plugin that owns the URL's scheme

    def resolve_orphans(self) -> None:
        """Adopt the work of launchers that were killed, or mark it failed
        (``xcore.runtime.orphans``). One query when no launcher holds a lease; the plugins
        load only when one does."""
        store = self.store
        try:
            leases = bool(store.leases())
        except Exception:  # noqa: BLE001 - an old or unusual store: resolve_orphans decides
            leases = True
        if leases:
            from xcore.runtime.orphans import resolve_orphans

            resolve_orphans(store, self.host)

    def settled_store(self) -> MetadataStore:
        """The store once killed launchers' work is settled (``resolve_orphans``, the first
        time it is asked): what commands that show, wait for or cancel work read."""
        store = self.store
        if not self._settled:
            self._settled = True
            self.resolve_orphans()
        return store

    def holds_nothing(self) -> bool:
        """Whether the store is the built-in SQLite file, of this xcore's schema, with no
        experiment and no launcher lease, read without the store's code (attrs, records,
        migrations) and without writing: ``xcore list``'s common first answer (issue 14:
        within 3x of ``python -c pass``). False when unsure (absent, another store, an older
        schema, an error): the usual path migrates, resolves and explains."""
        if self._store is not None:
            return False
        path = store_path(self._store_url)
        if not path or not os.path.isfile(path) or os.path.getsize(path) == 0:
            return False
        import sqlite3

        from xcore.store import migrations as store_migrations

        uri = os.path.abspath(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
        try:
            db = sqlite3.connect(f"file:{uri}?mode=ro", uri=True, timeout=1)
            try:
                [version] = db.execute("PRAGMA user_version").fetchone()
                if version != store_migrations.SCHEMA_VERSION:
                    return False
                [empty] = db.execute("SELECT NOT EXISTS (SELECT 1 FROM experiments)"
                                     " AND NOT EXISTS (SELECT 1 FROM launch_leases)").fetchone()
            finally:
                db.close()
        except sqlite3.Error:
            return False
        return bool(empty)

    # -- the end -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store if it was opened; the session's work is recorded."""
        self._closed = True
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def store_path(url: str | None = None) -> str | None:
    """The built-in store's file for ``url`` (default: where ``xcore.paths.store_url()``
    puts it), without importing pathlib (about a quarter of the fast ``xcore list``); None
    for another store or a platform whose default location only ``xcore.paths`` knows."""
    if url is None:
        url = os.environ.get("XCORE_STORE")
    if not url:
        home = os.environ.get("XCORE_HOME")
        if home:
            home = os.path.expanduser(home)
        elif sys.platform.startswith("linux"):
            home = os.path.join(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "xcore")
        else:
            return None
        return os.path.join(home, "xcore.db")
    if not url.startswith("sqlite:"):
        return None
    return (url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url.removeprefix("sqlite:")) or None


_current: Workspace | None = None


def current() -> Workspace:
    """The process's workspace, built on first use; built anew once it is no longer current
    (another XCORE_HOME or XCORE_STORE, another process plugin host, closed), as between tests."""
    global _current
    workspace = _current
    if workspace is None or not workspace.is_current():
        workspace = _current = Workspace()
    return workspace
