"""Built-in behaviour, registered as the plugin named "xcore": the backend-neutral
executable specs and the embedded SQLite metadata store."""

from __future__ import annotations

from typing import Any

from xcore.kinds import KindRegistrar
from xcore.markers import hookimpl
from xcore.store import MetadataStore


@hookimpl
def xcore_register_kinds(registry: KindRegistrar) -> None:
    from xcore import bazel, executables

    for cls in (
        bazel.BazelBinary,
        bazel.BazelContainer,
        executables.Binary,
        executables.PythonModule,
        executables.Container,
        executables.PythonContainer,
        executables.Dockerfile,
    ):
        registry.add(f"xcore.{cls.__name__}", cls)


@hookimpl(trylast=True)
def xcore_open_store(url: str, options: dict[str, Any]) -> MetadataStore | None:
    if not url.startswith("sqlite:"):
        return None
    from xcore.sqlite_store import SqliteStore

    # SQLAlchemy's spelling: sqlite:///relative.db and sqlite:////absolute/path.db
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url.removeprefix("sqlite:")
    if not path:
        raise ValueError(f"XCORE_STORE={url!r} names no file: write sqlite:////absolute/path/xcore.db.")
    return SqliteStore(path)
