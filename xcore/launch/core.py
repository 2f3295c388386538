"""XManager's ``xm.core`` names that are not classes of the experiment itself: the
experiment and unit a piece of launch code runs in, ``LaunchedJob`` and two errors."""

from __future__ import annotations

import contextvars
from typing import Any

from xcore.errors import (
    DebugInterrupt,
    ExperimentUnitError,
    ExperimentUnitFailedError,
    ExperimentUnitNotCompletedError,
    NotFoundError,
    ReloadError,
)
from xcore.model import datamodel

_current_experiment: contextvars.ContextVar[Any] = contextvars.ContextVar("_xm_current_experiment", default=None)
_current_experiment_unit: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "_xm_current_experiment_unit", default=None
)


def get_current_experiment() -> Any:
    """The experiment whose ``with`` block (or job generator) is running, else None."""
    return _current_experiment.get()


def get_current_experiment_unit() -> Any:
    """The unit whose job generator is running, else None."""
    return _current_experiment_unit.get()


def enter_experiment(experiment: Any) -> contextvars.Token[Any]:
    """Make ``experiment`` the current one (its ``with`` block opens); returns the token to leave it."""
    return _current_experiment.set(experiment)


def leave_experiment(token: contextvars.Token[Any]) -> None:
    """Undo ``enter_experiment``; a block left in another context (another task) just clears it."""
    try:
        _current_experiment.reset(token)
    except ValueError:
        _current_experiment.set(None)


def enter_unit(experiment: Any, unit: Any) -> None:
    """Inside a job generator's task: its experiment and unit are the current ones."""
    _current_experiment.set(experiment)
    _current_experiment_unit.set(unit)


def get_xid_from_context() -> int:
    """The id of the experiment whose context is active, or -1 outside any."""
    experiment = _current_experiment.get()
    return experiment.experiment_id if experiment is not None else -1


@datamodel.define(kw_only=True)
class LaunchedJob:
    """A read-only view of one launched job: its name, an address (the backend's id for it)
    and where its logs are."""

    name: str
    address: str | None = None
    logs: str | None = None


__all__ = [
    "DebugInterrupt", "ExperimentUnitError", "ExperimentUnitFailedError", "ExperimentUnitNotCompletedError",
    "LaunchedJob", "NotFoundError", "ReloadError", "get_current_experiment", "get_current_experiment_unit",
    "get_xid_from_context",
]
