"""Dependencies between work units: what a dependent waits for, and the words that say so.

``experiment.add(job, depends_on=[unit, ...], when="success")`` records one ``DependencyEdge``
per unit (or job of a JobGroup) the new unit waits for. A backend that can wait natively
(``Backend.native_dependencies``: Slurm, Grid Engine, xlocal's runner) gets each job's
dependencies as ``LaunchRequest.depends_on``; elsewhere the core holds the unit and an
observer submits it once its dependencies ended (``xcore.runtime.dependents``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from xcore.model import datamodel
from xcore.model.status import Status

WHEN = ("success", "finished")
"""``when="success"``: run only if every dependency completed; ``"finished"``: once each ended, however."""


@datamodel.frozen
class DependencyEdge:
    """Unit ``work_unit_id`` of ``experiment_id`` waits for unit ``on_work_unit_id`` of
    ``on_experiment_id`` (its job ``on_job`` only, or the whole unit when ``on_job`` is '')."""

    experiment_id: int
    work_unit_id: int
    on_experiment_id: int
    on_work_unit_id: int
    on_job: str = ""
    when: str = "success"

    @property
    def on_name(self) -> str:
        """``3/1`` or ``3/1 train``: the dependency as ``xcore show`` names units."""
        name = f"{self.on_experiment_id}/{self.on_work_unit_id}"
        return f"{name} {self.on_job}" if self.on_job else name


@datamodel.frozen
class Dependency:
    """One job a ``LaunchRequest`` must wait for (``LaunchRequest.depends_on``).

    - ``job_id``: the dependency's id in the store.
    - ``handle``: its ``JobHandle`` when it was submitted earlier (the same backend's kind);
      None when it is in the same ``launch`` call: find it there by ``job_id``.
    - ``when``: ``"success"`` (start only if it completed: Slurm ``afterok``) or
      ``"finished"`` (once it ended: ``afterany``).
    - ``name``: how messages name it (``3/1``); a dependent that will never run reads
      CANCELLED with ``dependency_message(name, status)``.
    """

    job_id: int
    handle: Any
    when: str
    name: str


def satisfied(status: Status, when: str) -> bool:
    """Whether a dependency that ended ``status`` lets a dependent with ``when`` run."""
    return status is Status.COMPLETED or (when == "finished" and status.is_terminal)


def dependency_message(name: str, status: Status) -> str:
    """The CANCELLED message of a dependent that will never run: ``dependency 3/1 failed``."""
    word = "cancelled" if status is Status.CANCELLED else "failed"
    return f"dependency {name} {word}"


def waiting_message(names: Iterable[str]) -> str:
    """A held unit's PENDING message: ``waiting for 3/1, 3/2``."""
    listed = list(dict.fromkeys(names))
    shown = ", ".join(listed[:4])
    more = f" and {len(listed) - 4} more" if len(listed) > 4 else ""
    return f"waiting for {shown}{more}"


def find_cycle(edges: dict[tuple[int, int], set[tuple[int, int]]], start: tuple[int, int]) -> list[tuple[int, int]]:
    """A path from ``start`` back to itself through ``edges`` (unit -> the units it waits
    for), or [] when there is none."""
    stack: list[tuple[tuple[int, int], list[tuple[int, int]]]] = [(start, [start])]
    seen: set[tuple[int, int]] = set()
    while stack:
        node, path = stack.pop()
        for nxt in edges.get(node, ()):
            if nxt == start:
                return [*path, nxt]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return []
