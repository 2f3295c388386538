"""A synthetic sweep written straight into a store (no backend), for the dashboard's
benchmarks, tests and screenshots: work units with arguments, jobs in every status,
status history, results and links."""

from __future__ import annotations

import math
from collections.abc import Sequence

from xcore.model.status import JobState, Status
from xcore.store import MetadataStore
from xcore.store.records import NewJob

STATUSES = (Status.COMPLETED, Status.COMPLETED, Status.COMPLETED, Status.FAILED, Status.RUNNING, Status.PENDING)


def sample_sweep(store: MetadataStore, trials: int, *, title: str = "sample sweep", tags: Sequence[str] = ("sample",),
                 user: str = "researcher", extra_args: dict[str, object] | None = None, curves: bool = False) -> int:
    """Record a ``trials``-unit sweep over lr x batch size with losses (and, with ``curves``,
    their learning curves); returns its id. Jobs have no handle (nothing was launched), so
    nothing polls a backend for them."""
    record = store.create_experiment(title, tags=list(tags), user=user, host="localhost")
    store.update_experiment(record.id, launch_status="LAUNCHED")
    states: list[tuple[int, JobState]] = []
    results: list[tuple[int, dict[str, float | None]]] = []
    for unit_id in range(1, trials + 1):
        lr = [0.3, 0.1, 0.03, 0.01, 0.003][unit_id % 5]
        batch = [8, 32, 64, 128][(unit_id // 5) % 4]
        args = {"lr": lr, "batch_size": batch, "seed": unit_id, **(extra_args or {})}
        job = NewJob("job", "sample.Executor", {}, {}, [f"--lr={lr}", f"--batch_size={batch}"], {})
        [job_id] = store.add_work_unit(record.id, unit_id, "work_unit", args, "", [job])
        status = STATUSES[unit_id % len(STATUSES)]
        exit_code = 0 if status is Status.COMPLETED else 1 if status is Status.FAILED else None
        message = "exited with 1" if status is Status.FAILED else ""
        states.append((job_id, JobState(status, message, exit_code)))
        if status is Status.COMPLETED:
            loss = abs(math.log10(lr) + 1.7) * 0.1 + 8 / batch * 0.01 + (unit_id % 7) * 1e-3
            results.append((job_id, {"loss": loss, "accuracy": 1 - loss}))
    for start in range(0, len(states), 1000):
        store.record_states(states[start : start + 1000])
    for job_id, values in results:
        store.record_results(job_id, values, final=True)
        if curves:
            final = values["loss"] or 0.0
            store.record_series(job_id, {"loss": [(step, final * (1 + 5 / (1 + step / 50))) for step in
                                                  range(0, 500, 10)]})
    return record.id
