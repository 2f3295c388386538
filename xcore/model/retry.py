"""``Retry``: which failures of a job are run again, and how often.

One policy for every backend. A backend that can retry by itself (Slurm's requeue, xlocal's
runner) is handed the resolved policy in ``LaunchRequest.retry``; for one that cannot (a
Vertex CustomJob), any xcore process that observes the failure relaunches the job as the
next attempt (``xcore.runtime.relaunch``). A policy is given to an executor (``retry=``, all
its jobs) or to ``xm.Job`` (overrides); with none, ``DEFAULT_RETRY`` applies: preemption and
node failure are retried, a program's own failure never is.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from xcore.model import datamodel
from xcore.model.status import FAILURE_CLASSES

#: Names ``Retry(on=...)`` accepts for a class besides the class itself.
_ALIASES = {"preemption": "preempted", "oom": "out_of_memory", "node": "node_failure"}


def failure_class(name: str) -> str:
    """The failure class ``name`` means (``"preemption"`` -> ``"preempted"``); ValueError if none."""
    found = _ALIASES.get(name, name)
    if found not in FAILURE_CLASSES:
        raise ValueError(f"Retry(on=...): unknown failure class {name!r}; use some of "
                         f"{', '.join(FAILURE_CLASSES)} (or 'preemption').")
    return found


def _classes(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"Retry(on=...) takes failure class names such as ('preemption', 'error'), "
                        f"got {value!r}.") from None
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"Retry(on=...) takes failure class names (str), got {item!r}.")
    return tuple(dict.fromkeys(failure_class(item) for item in items))


def _codes(value: Any) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"Retry(exit_codes=...) takes whole numbers such as (3, 75), got {value!r}.") from None
    for item in items:
        if not isinstance(item, int) or isinstance(item, bool) or not 0 < item < 256:
            raise ValueError(f"Retry(exit_codes=...): {item!r} is not an exit code a program can fail with "
                             "(1 to 255).")
    return items


def _check_attempts(instance: object, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"Retry(max_attempts=...) must be a whole number >= 1 (1: never retry), got {value!r}.")


def _check_backoff(instance: object, attribute: attrs.Attribute, value: Any) -> None:
    if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
            or value < 0):
        raise ValueError(f"Retry(backoff_secs=...) must be a number of seconds >= 0, got {value!r}.")


@datamodel.frozen
class Retry:
    """Run a failed job again, up to ``max_attempts`` attempts in all (the first included).

    - ``on``: the failure classes that are retried: ``preemption`` (``preempted``),
      ``node_failure``, ``timeout``, ``out_of_memory``, ``error`` (the program failed),
      ``lost``, ``launch``.
    - ``exit_codes``: exit codes of the program that are retried even when ``error`` is not
      in ``on`` (a program that exits 75 to ask for a restart).
    - ``backoff_secs``: wait before the second attempt, doubling for each later one.

    ``Retry(max_attempts=1)`` never retries. A bad policy raises at once with what to fix.
    """

    max_attempts: int = attrs.field(default=3, validator=_check_attempts)
    on: tuple[str, ...] = attrs.field(default=("preempted", "node_failure"), converter=_classes)
    exit_codes: tuple[int, ...] = attrs.field(default=(), converter=_codes)
    backoff_secs: float = attrs.field(default=0.0, validator=_check_backoff)

    def retries(self, failure: str | None, exit_code: int | None, attempt: int) -> bool:
        """Whether attempt ``attempt`` (1-based), which failed with class ``failure`` (None
        reads ``error``) and ``exit_code``, is followed by another."""
        if attempt >= self.max_attempts:
            return False
        failure = failure or "error"
        if failure in self.on:
            return True
        return failure == "error" and exit_code is not None and exit_code in self.exit_codes

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        return self.backoff_secs * 2 ** max(0, attempt - 1) if self.backoff_secs else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"max_attempts": self.max_attempts, "on": list(self.on), "exit_codes": list(self.exit_codes),
                "backoff_secs": self.backoff_secs}

    @classmethod
    def from_json(cls, data: Any) -> Retry | None:
        """A policy as stored (``to_json``, or cattrs' dict of an executor's field); None for none."""
        if data is None:
            return None
        if isinstance(data, Retry):
            return data
        return cls(int(data.get("max_attempts", 3)), tuple(data.get("on", ("preempted", "node_failure"))),
                   tuple(data.get("exit_codes", ())), float(data.get("backoff_secs", 0.0)))


DEFAULT_RETRY = Retry()
"""The policy of a job that names none: preemption and node failure, up to 3 attempts."""

NO_RETRY = Retry(max_attempts=1)
"""A policy that never retries."""


def check_retry(value: Any, where: str) -> Retry | None:
    """``value`` if it is a policy or None; a clear TypeError otherwise (``where`` names the field)."""
    if value is None or isinstance(value, Retry):
        return value
    raise TypeError(f"{where} takes xm.Retry(max_attempts=..., on=(...)), got {type(value).__name__} "
                    f"({value!r:.60}).")


def resolve(job_retry: Retry | None, executor_retry: Retry | None) -> Retry:
    """The policy a job runs under: its own, else its executor's, else the default."""
    return job_retry or executor_retry or DEFAULT_RETRY
