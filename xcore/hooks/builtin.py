"""Built-in behaviour, registered as the plugin named "xcore": the backend-neutral
executable specs, the embedded SQLite metadata store, the PostgreSQL team store and the
W&B, Neptune and TensorBoard tracker integrations."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from xcore.hooks.kinds import KindRegistrar
from xcore.hooks.markers import hookimpl
from xcore.store import POSTGRES_SCHEMES, MetadataStore

if TYPE_CHECKING:
    from xcore.model.tracking import JobTracking, TrackedJob


KINDS = ("xcore.BazelBinary", "xcore.BazelContainer", "xcore.Binary", "xcore.PythonModule", "xcore.Container",
         "xcore.PythonContainer", "xcore.Dockerfile")
"""What ``xcore_register_kinds`` adds, declared as plugins declare theirs (``xcore.kinds``): the
host registers them (importing ``xcore.model.bazel``) only when one of them is needed, which a
status poll never does."""


@hookimpl
def xcore_register_kinds(registry: KindRegistrar) -> None:
    from xcore.model import bazel, executables

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
    """``options["migrate"]``: migrate an older schema (``xcore store migrate``); the SQLite
    file always does, a shared server only when asked."""
    if url.startswith(POSTGRES_SCHEMES):
        from xcore.store.postgres import open_url as open_postgres

        return open_postgres(url, migrate=bool(options.get("migrate", False)))
    if not url.startswith("sqlite:"):
        return None
    from xcore.store.sqlite import open_url

    return open_url(url, migrate=bool(options.get("migrate", True)))


@hookimpl
def xcore_job_tracking(job: TrackedJob) -> JobTracking | None:
    return _tracking()(job)


@functools.cache
def _tracking() -> Callable[[TrackedJob], JobTracking | None]:
    """The built-in trackers, imported on first use (once: this hook runs for every job)."""
    from xcore.trackers.builtin import tracking

    return tracking
