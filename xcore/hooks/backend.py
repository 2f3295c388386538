"""``Backend``: a plugin's backend as one object that serves the kinds it declares.

The class form of the execution hooks (plugin API 1.1). A plugin subclasses ``Backend``,
lists its classes once in ``kinds`` and gives an instance to the registrar in its
``xcore_register_kinds`` hook::

    class MyBackend(xp.Backend):
        kinds = (My, MySpec, MyExecutable, MyHandle)   # registered as "<plugin>.<ClassName>"

        def package(self, packageable, context): ...
        def launch(self, requests, context): ...
        def states(self, handles): ...
        def cancel(self, handles): ...
        def logs(self, handle, follow): ...
        def shell(self, handle, command): ...  # optional: a ShellCommand for `xcore shell`

    @xp.hookimpl
    def xcore_register_kinds(registry):
        registry.add_backend(MyBackend())

The plugin host then calls the methods of the one object that declared a job's kind: its
executor spec's kind for ``package``, its executor's for ``launch`` and ``adopt``, its
handle's for ``states``, ``wait_for_change``, ``cancel``, ``logs``, ``shell`` and ``env``. So a plugin with two
kinds of jobs (xlocal's processes and containers) writes two backends instead of routing
by kind strings. Each method is the hook of the same name in ``xcore.hooks.specs`` (its
docstring is the reference: arguments, results, the rules) minus the ``*_kind`` argument.
Module-level hook functions (plugin API 1.0) keep working for kinds no backend serves.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from xcore.model.execution import JobHandle, LaunchContext, LaunchFailure, LaunchRequest, PackagingContext
    from xcore.model.job_blocks import Executable, Packageable
    from xcore.model.shell import ShellCommand
    from xcore.model.status import JobState

#: Which methods a backend must write for each category of kind it declares (the others have
#: defaults: ``adopt`` cannot tell, ``wait_for_change`` does not wait, ``env`` keeps nothing).
REQUIRED = {
    "executor spec": ("package",),
    "executor": ("launch",),
    "job handle": ("states", "cancel", "logs"),
}


class Backend:
    """Serves the kinds in ``kinds``: packages for its executor specs, launches its executors'
    jobs, and reports, cancels and reads the logs of jobs with its handles.

    Handles arrive as your own handle classes (annotate them so in your subclass: the base
    types them ``Any`` so that you can).
    """

    kinds: ClassVar[tuple[type, ...]] = ()
    """The attrs classes this backend owns (executors, executor specs, executable specs,
    packaged executables, job handles), each registered as ``"<plugin>.<ClassName>"``. List
    the same kinds in your ``pyproject.toml`` (``xcore.kinds`` entry points)."""

    native_dependencies: ClassVar[bool] = False
    """Whether ``launch`` honours ``LaunchRequest.depends_on``: starts each job only once its
    dependencies ended as their ``when`` asks, and ends it CANCELLED (never run) if one ended
    otherwise. False: the core holds such jobs and submits them itself once their dependencies
    ended (``xcore.runtime.dependencies``)."""

    def waits_for(self, executor: Any, when: str) -> bool:
        """Whether jobs of ``executor`` can wait natively for a dependency with ``when``
        (``"success"`` or ``"finished"``); ``native_dependencies`` unless overridden."""
        return self.native_dependencies

    def package(self, packageable: Packageable, context: PackagingContext) -> Executable | None:
        """``xcore_package``: your packaged executable, or None if you cannot package this spec."""
        raise NotImplementedError

    def launch(self, requests: Sequence[LaunchRequest],
               context: LaunchContext) -> Sequence[JobHandle | LaunchFailure]:
        """``xcore_launch``: one handle (``log_path`` set) or ``LaunchFailure`` per request, in order."""
        raise NotImplementedError

    def adopt(self, requests: Sequence[LaunchRequest], context: LaunchContext) -> Sequence[JobHandle | None] | None:
        """``xcore_adopt``: per request the handle of a job a dead launcher submitted, or None;
        None when you cannot tell (the default)."""
        return None

    def states(self, handles: Sequence[Any]) -> Sequence[JobState]:
        """``xcore_job_states``: one ``JobState`` per handle, in order (report ``started_at`` and
        ``ended_at``: durations are computed from them)."""
        raise NotImplementedError

    def wait_for_change(self, handles: Sequence[Any], timeout: float) -> bool:
        """``xcore_wait_for_change``: block until some job may have changed, at most ``timeout``
        seconds, and return True; False (the default) when you cannot tell: the core sleeps."""
        return False

    def cancel(self, handles: Sequence[Any]) -> None:
        """``xcore_cancel``: stop these jobs (leave ended ones), blocking at most for the grace period."""
        raise NotImplementedError

    def logs(self, handle: Any, follow: bool) -> Iterator[str]:
        """``xcore_job_logs``: the job's output as text chunks (``xcore.plugin.follow_file``)."""
        raise NotImplementedError

    def log_lines(self, handles: Sequence[Any], marker: str) -> Sequence[list[str] | None] | None:
        """``xcore_job_log_lines``: per handle the lines holding ``marker`` (None: not readable
        now), read in one round trip per host; None (the default): the core reads each log."""
        return None

    def shell(self, handle: Any, command: list[str] | None) -> ShellCommand | None:
        """``xcore_job_shell``: how ``xcore shell`` gets into the running job (the program it
        replaces itself with, its cwd and env), ``command`` or an interactive shell when None;
        None (the default): this backend cannot, and the user is told so."""
        return None

    def env(self, handle: Any) -> dict[str, str] | None:
        """``xcore_job_env``: the job's real, unredacted environment where the backend keeps it
        privately (a 0600 batch or task file), for ``xcore retry``; None when gone (the default)."""
        return None


#: The hook each method is, for ``xcore plugins --json`` (a backend's plugin lists them as its hooks).
HOOK_OF = {"package": "xcore_package", "launch": "xcore_launch", "adopt": "xcore_adopt",
           "states": "xcore_job_states", "wait_for_change": "xcore_wait_for_change", "cancel": "xcore_cancel",
           "logs": "xcore_job_logs", "log_lines": "xcore_job_log_lines", "shell": "xcore_job_shell",
           "env": "xcore_job_env"}


def served_hooks(backend: Backend) -> set[str]:
    """The hooks ``backend`` implements (the methods it overrides)."""
    return {hook for name, hook in HOOK_OF.items() if getattr(type(backend), name) is not getattr(Backend, name)}


def missing_methods(backend: Backend, category: str) -> list[str]:
    """The methods ``backend`` must write to serve a kind of ``category`` but inherits."""
    return [name for name in REQUIRED.get(category, ())
            if getattr(type(backend), name) is getattr(Backend, name)]
