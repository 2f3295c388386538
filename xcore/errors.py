"""Every error xcore raises on purpose; each message says what to fix."""


class XcoreError(Exception):
    """Base class: an error whose message is meant for the user, printed without a traceback."""


class ConfigurationError(XcoreError):
    """A setting, file or environment variable is invalid."""


class ResourceSpecError(XcoreError, ValueError):
    """A JobRequirements entry cannot be understood."""


class UnknownKindError(XcoreError):
    """No installed plugin provides a kind of executor, spec or handle."""


class DuplicateKindError(XcoreError):
    """Two plugins claim the same kind."""


class PluginLoadError(XcoreError):
    """A plugin's entry point failed to import or register."""


class PackagingError(XcoreError):
    """An executable could not be packaged."""


class LaunchError(XcoreError):
    """A job could not be submitted to its backend."""


class BackendUnavailableError(XcoreError):
    """The backend could not be asked right now (its host unreachable, its service restarting):
    a passing outage, not an answer. ``xcore wait`` keeps waiting through it (with a warning)
    instead of reading the jobs' states as UNKNOWN and giving up.

    A status hook that reached some of its jobs (one cluster of two is down) passes what it
    knows as ``states``: one entry per handle, in order, None for those out of reach."""

    def __init__(self, message: str, states: list[object | None] | None = None) -> None:
        super().__init__(message)
        self.states = states


class NotFoundError(XcoreError, KeyError):
    """An experiment, work unit or job does not exist in the store."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ExperimentUnitError(XcoreError, RuntimeError):
    """A work unit could not be created or launched (XManager name)."""

    def __init__(self, message: object = "", *, work_unit: object = None) -> None:
        super().__init__(message)
        self.work_unit = work_unit


class ExperimentUnitFailedError(ExperimentUnitError):
    """A work unit finished unsuccessfully (XManager name)."""


class ExperimentUnitNotCompletedError(ExperimentUnitError):
    """A work unit ended without completing, e.g. it was cancelled (XManager name)."""


class StoreError(XcoreError):
    """The metadata store cannot be opened, read or written (corrupt, read-only, full, locked)."""


class StoreFullError(StoreError):
    """A write to the metadata store failed because its disk is full. Reads still work, so a
    command that only records what it read (a status refresh) warns and goes on."""


class ReloadError(ExperimentUnitError):
    """A check failed while reloading an experiment unit (XManager name)."""


class DebugInterrupt(BaseException):
    """Raise it inside a job generator to stop that unit's launch on purpose (XManager name):
    the unit is stopped and the rest of the experiment goes on."""
