"""What the experiment page's charts load: the trials as columns (one list per argument and
result, so 100,000 trials are not 100,000 JSON objects), at most ``MAX_TRIALS`` of them (an
even sample of a bigger sweep, said in the answer), and the timeline counted over every
trial on the server, at most ``MAX_TIMELINE`` points."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from xcore.model.status import Status
from xcore.workspace.views import UnitView

MAX_TRIALS = 5000  # a scatter or parallel-coordinates plot shows no more than this legibly
MAX_TIMELINE = 400
MAX_GROUP_TRIALS = 2000  # group mean curves are worked out over at most this many trials (an even sample)


def sample(rows: Sequence[UnitView], limit: int = MAX_TRIALS) -> list[UnitView]:
    """Every ``len/limit``-th row (evenly spaced, the last included), or all when few."""
    if len(rows) <= limit:
        return list(rows)
    step = len(rows) / limit
    return [rows[min(len(rows) - 1, int(i * step))] for i in range(limit)]


def payload(rows: Sequence[UnitView], arg_names: Sequence[str], result_names: Sequence[str]) -> dict[str, Any]:
    """The chart endpoint's JSON: ``ids``, ``status``, ``args`` and ``results`` (name: values
    in the order of ``ids``, None where missing) of the sampled work units, ``total`` work
    units, and ``timeline``."""
    work = [r for r in rows if r.role == "work_unit"]
    shown = sample(work)
    return {
        "args": list(arg_names), "results": list(result_names), "total": len(work), "ids": [r.id for r in shown],
        "status": [r.status.value for r in shown],
        "arg_values": {name: [r.named_args.get(name) for r in shown] for name in arg_names},
        "result_values": {name: [r.results.get(name) for r in shown] for name in result_names},
        "timeline": timeline(work),
    }


def timeline(rows: Sequence[UnitView], limit: int = MAX_TIMELINE) -> dict[str, list[float]]:
    """How many work units were queued, running, completed and failed (or cancelled) over
    time, after each change, thinned to about ``limit`` points (the last one kept), and on to
    now while any is unfinished."""
    events: list[tuple[float, int, int]] = []  # (when, column, +1/-1); columns as in `names` below
    for row in rows:
        if row.created_at is None:
            continue
        events.append((row.created_at, 0, 1))
        if row.started_at is not None:
            events += [(row.started_at, 0, -1), (row.started_at, 1, 1)]
        if row.ended_at is not None:
            events.append((row.ended_at, 1 if row.started_at is not None else 0, -1))
            events.append((row.ended_at, 2 if row.status is Status.COMPLETED else 3, 1))
    events.sort()
    names = ("queued", "running", "completed", "failed")
    counts = [0, 0, 0, 0]
    out: dict[str, list[float]] = {"t": [], **{name: [] for name in names}}
    stride = max(1, len(events) // limit)
    since = stride  # changes since the last point kept: the first instant is always kept
    for at, (when, column, change) in enumerate(events):
        counts[column] += change
        since += 1
        end_of_instant = at == len(events) - 1 or events[at + 1][0] != when
        if end_of_instant and (since >= stride or at == len(events) - 1):
            out["t"].append(when)
            for name, count in zip(names, counts, strict=True):
                out[name].append(count)
            since = 0
    if out["t"] and any(r.ended_at is None for r in rows):  # drawn on to now while anything is unfinished
        out["t"].append(max(time.time(), out["t"][-1]))
        for name in names:
            out[name].append(out[name][-1])
    return out


def group_curves(groups: dict[str, list[list[tuple[float, float | None]]]], limit: int = 300
                 ) -> list[dict[str, Any]]:
    """Each group's mean curve and its sample standard deviation, aligned by step: on the
    union of its members' steps (at most ``limit``, evenly picked), each member read there by
    linear interpolation within its own first and last step (never extrapolated); a step
    that one member covers has std None."""
    out = []
    for label, members in groups.items():
        curves = [[(s, v) for s, v in points if v is not None] for points in members]
        curves = [c for c in curves if c]
        steps = sorted({s for c in curves for s, _ in c})
        if len(steps) > limit:
            steps = [steps[round(i * (len(steps) - 1) / (limit - 1))] for i in range(limit)]
        means: list[float | None] = []
        stds: list[float | None] = []
        for step in steps:
            values = [v for v in (_at(c, step) for c in curves) if v is not None]
            mean = sum(values) / len(values) if values else None
            means.append(mean)
            stds.append((sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
                        if mean is not None and len(values) > 1 else None)
        out.append({"label": label, "n": len(curves), "steps": steps, "mean": means, "std": stds})
    return out


def _at(curve: list[tuple[float, float]], step: float) -> float | None:
    """``curve``'s value at ``step`` (sorted by step), interpolated; None outside it."""
    import bisect

    if step < curve[0][0] or step > curve[-1][0]:
        return None
    at = bisect.bisect_left(curve, (step, float("-inf")))
    s1, v1 = curve[at]
    if s1 == step or at == 0:
        return v1
    s0, v0 = curve[at - 1]
    return v0 + (v1 - v0) * (step - s0) / (s1 - s0)
