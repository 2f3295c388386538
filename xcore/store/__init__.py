"""The metadata store: its interface (``base``), implemented once over SQL (``sql``, its
statements in ``statements``, its tables in ``schema``) for a dialect (``dialect``): the embedded
SQLite store (``sqlite``) and the PostgreSQL team store (``postgres``); the schema versions
(``migrations``), the records (``records``) and rows (``rows``, ``specs``) they hold, copying
between stores (``copy``) and what is never stored in clear (``redaction``).

The interface's names load on first use, so a command that only needs ``migrations`` (the
fast ``xcore list``) does not pay for attrs and the records.
"""

from __future__ import annotations

from xcore.lazy import lazy_exports

TYPE_CHECKING = False  # typing is not imported for the fast paths
if TYPE_CHECKING:
    from xcore.store.base import ExperimentHistory, Imported, MetadataStore, StoreInfo

_EXPORTS = {name: "xcore.store.base" for name in ("ExperimentHistory", "Imported", "MetadataStore", "StoreInfo")}
__all__ = sorted(_EXPORTS)

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""URLs of the built-in PostgreSQL team store (``postgres``). The hook spec gives them to the
built-in plugin, so the workspace opens them without building the plugin host."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
