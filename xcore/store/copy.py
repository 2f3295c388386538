"""``xcore store copy``: move recorded history between stores (SQLite <-> PostgreSQL).

Each experiment is copied in one transaction of the destination, with its work units, jobs and
status history. Running the copy again copies nothing twice: every copied experiment keeps the
``origin`` of its first recording, and the destination skips origins it holds (or experiments
that started out in the destination itself). Ids are kept when free in the destination;
otherwise the experiment (or its jobs) gets new ids and the mapping is reported.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from xcore.store import Imported, MetadataStore


@attrs.define
class CopyReport:
    copied: list[Imported] = attrs.field(factory=list)
    skipped: int = 0

    @property
    def renumbered(self) -> dict[int, int]:
        """Source experiment id -> destination id, for experiments whose id changed."""
        return {i.source_id: i.experiment_id for i in self.copied
                if i.experiment_id is not None and i.experiment_id != i.source_id}


def copy_store(source: MetadataStore, destination: MetadataStore,
               on_copied: Callable[[Imported], None] | None = None) -> CopyReport:
    """Copy every experiment of ``source`` into ``destination``, oldest first."""
    report = CopyReport()
    ids = sorted(r.id for r in source.list_experiments(limit=None))
    for experiment_id in ids:
        imported = destination.import_history(source.export_history(experiment_id))
        if imported.experiment_id is None:
            report.skipped += 1
            continue
        report.copied.append(imported)
        if on_copied is not None:
            on_copied(imported)
    return report
