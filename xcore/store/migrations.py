"""Schema versions of the metadata stores, and what opening a store of another version does.

Both stores number their schema the same way: version N means the same tables and columns in
SQLite and in PostgreSQL, so ``xcore store info`` reads alike for both and ``xcore store copy``
works between any two stores of the current version.

- 1: experiments, work_units, jobs, job_events (xcore 0.1.0).
- 2: ``store_meta`` (the store's id), ``experiments.origin`` (where a copied experiment was
  first recorded: copies are idempotent), an index on ``experiments.user`` (``list --user``).
- 3: launcher leases and submission intents (``launch_leases``, ``launch_intents``,
  ``jobs.lease_id``), so a killed launcher's work is adopted or failed by the next command.
  Leases are never copied: ``xcore store copy`` moves recorded history, not running launchers.
- 4: trial results and tracker links (``job_results``, ``job_links``, ``jobs.results_at``).
- 5: shared job specs (``job_specs``, ``jobs.executor_spec``, ``jobs.executable_spec`` in place of
  ``jobs.executor`` and ``jobs.executable``; see ``xcore.store.specs``), and ``jobs_by_lease`` on
  ``lease_id`` alone: a sweep's rows shrink from about 1 KB to a few hundred bytes. Space the
  old rows held is reused by new records; to give it back to the disk, ``VACUUM`` the SQLite
  file (``sqlite3 xcore.db VACUUM``) or ``VACUUM FULL jobs`` on PostgreSQL, once, when idle.
- 6: dependencies between work units (``unit_dependencies``) and the units held until their
  dependencies end (``held_units``), see ``xcore.model.dependencies``.
- 7: learning curves (``job_series``: each job's downsampled ``(step, value)`` points per name).
- 8: the notifications outbox (``notifications``: one row per event and sink, its delivery
  state; see ``xcore.runtime.notifications``). Never copied by ``xcore store copy``.

- 9: attempts (``jobs.attempt``, ``jobs.failure``, ``job_attempts``): a retried job keeps its
  id, its row holds the current attempt and each earlier one is kept (``xcore.model.retry``).

A store older than the code is migrated forward in one transaction: on open for the personal
SQLite file, by ``xcore store migrate`` for a shared server (so one person decides when every
teammate's xcore must be new enough). A newer store is never touched.
"""

from __future__ import annotations

from xcore.errors import ConfigurationError

SCHEMA_VERSION = 9  # both stores' version: each asserts it has exactly this many migrations


class SchemaVersionError(ConfigurationError):
    """The store's schema is not the one this xcore reads, and it was not migrated."""


def check_version(found: int, where: str, *, will_migrate: bool, current: int = SCHEMA_VERSION) -> bool:
    """Raise if a store at version ``found`` cannot be used by code whose schema is ``current``;
    True if it must be migrated first."""
    if found > current:
        raise SchemaVersionError(
            f"The metadata store {where} has schema version {found}, newer than this xcore understands "
            f"({current}). Upgrade xcore (pip install -U xcore-core) to read it; nothing was changed."
        )
    if found == current:
        return False
    if not will_migrate:
        raise SchemaVersionError(
            f"The metadata store {where} has schema version {found}; this xcore needs {current}. "
            f"Run `xcore store migrate` once (it migrates in one transaction, keeping every record); "
            f"teammates then need an xcore that knows schema {current}."
        )
    return True
