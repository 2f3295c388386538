"""Learning curves: ``XCORE_RESULT`` lines that carry a ``step`` become series.

    XCORE_RESULT {"step": 100, "loss": 0.3, "accuracy": 0.91}

adds the point ``(100, 0.3)`` to the series ``loss`` and ``(100, 0.91)`` to ``accuracy`` (the last
value of each still fills the results columns). A series is kept compactly as it is read: at
most ``MAX_POINTS`` evenly spaced points (every k-th point, k doubling as the log grows) plus
its last point, so a million-step log costs a few hundred points in memory and in the store.
"""

from __future__ import annotations

__all__ = ["MAX_POINTS", "Series", "SeriesSet"]

MAX_POINTS = 300
STEP = "step"


class Series:
    """One name's points, thinned as they come: every ``stride``-th point is kept; when twice
    ``MAX_POINTS`` are held, every other one is dropped and the stride doubles."""

    __slots__ = ("last", "points", "seen", "stride")

    def __init__(self) -> None:
        self.points: list[tuple[float, float | None]] = []
        self.stride = 1
        self.seen = 0
        self.last: tuple[float, float | None] | None = None

    def add(self, step: float, value: float | None) -> None:
        self.last = (step, value)
        if self.seen % self.stride == 0:
            self.points.append(self.last)
            if len(self.points) >= 2 * MAX_POINTS:
                del self.points[1::2]
                self.stride *= 2
        self.seen += 1

    def finished(self) -> list[tuple[float, float | None]]:
        """At most ``MAX_POINTS`` + 1 points, the first and the last among them."""
        points = self.points
        if len(points) > MAX_POINTS:
            every = -(-len(points) // MAX_POINTS)
            points = points[::every]
        if self.last is not None and (not points or points[-1] is not self.last):
            points = [*points, self.last]
        return points


class SeriesSet:
    """Every series of one log, by name."""

    def __init__(self) -> None:
        self.by_name: dict[str, Series] = {}

    def add(self, values: dict[str, float | None]) -> None:
        """A result line's values: a point of each other name when it has a numeric ``step``."""
        step = values.get(STEP)
        if step is None:
            return
        for name, value in values.items():
            if name != STEP:
                series = self.by_name.get(name)
                if series is None:
                    series = self.by_name[name] = Series()
                series.add(step, value)

    def finished(self) -> dict[str, list[tuple[float, float | None]]]:
        return {name: series.finished() for name, series in self.by_name.items()}
