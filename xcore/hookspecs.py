"""Every hook a plugin can implement, grouped by what it is for.

Implement a hook with ``@xcore.hookimpl`` in a module or class that your distribution
names under the ``xcore`` entry-point group::

    [project.entry-points.xcore]
    myplugin = "myplugin.hooks"

Implementations may accept a subset of a hook's arguments, so hooks can gain arguments
without breaking plugins. Hooks marked *firstresult* stop at the first non-None result:
return None for kinds you do not own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any



if TYPE_CHECKING:
    import argparse

    from xcore.execution import JobHandle, LaunchContext, LaunchRequest, PackagingContext
    from xcore.job_blocks import Executable, Packageable
    from xcore.kinds import KindRegistrar
    from xcore.status import JobState
    from xcore.store import MetadataStore

from xcore.markers import hookspec


# -------------------------------------------------------------------------------------------
# Registration
# -------------------------------------------------------------------------------------------


@hookspec
def xcore_register_kinds(registry: KindRegistrar) -> None:
    """Register the classes this plugin owns: executors, executor specs, executable specs,
    packaged executables and job handles.

    Called once per process, the first time the core needs to know a kind.

    :param registry: call ``registry.add("myplugin.Name", Cls)`` for each attrs class.
        Kinds are ``"<plugin>.<Name>"``. Claiming a kind another plugin registered is an
        error that names both plugins.
    """


@hookspec
def xcore_add_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add subcommands to the ``xcore`` command line.

    Called when the CLI builds its parser. Set ``func`` with ``parser.set_defaults(func=...)``;
    the function receives the parsed ``argparse.Namespace`` and returns an exit code.
    Import heavy modules inside that function, not here: ``xcore --help`` must stay fast.

    :param subparsers: the object ``argparse.ArgumentParser.add_subparsers`` returned.
    """


# -------------------------------------------------------------------------------------------
# Packaging
# -------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def xcore_package(packageable: Packageable, context: PackagingContext) -> Executable | None:
    """Turn an executable spec into a packaged executable for an executor spec.

    Called once per distinct packageable in ``experiment.package`` and for every
    ``Job`` whose executable still needs packaging. Stops at first non-None result.

    :param packageable: the spec, the executor spec, and default args and env vars.
    :param context: a cache directory and a progress reporter for long builds.
    :return: the packaged executable (carrying ``packageable.args``/``env_vars``), or
        None when this plugin cannot package this pair.
    :raises xcore.PackagingError: with a message that says what to fix.
    """


# -------------------------------------------------------------------------------------------
# Execution
# -------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def xcore_launch(
    executor_kind: str, requests: Sequence[LaunchRequest], context: LaunchContext
) -> Sequence[JobHandle] | None:
    """Submit a batch of jobs that all use executors of one kind.

    The core collects every job added in a burst, so a sweep arrives here as one call and
    can become one submission (an array job, one API batch). Stops at first non-None result.

    :param executor_kind: the registered kind of every request's executor.
    :param requests: the jobs, with final argv strings and complete environments.
    :param context: a state directory and a progress reporter.
    :return: one handle per request, in the same order; None if the kind is not yours.
    :raises xcore.LaunchError: if nothing was submitted. Raise only when no job of the batch
        reached the backend, so that nothing submitted goes unrecorded.
    """


# -------------------------------------------------------------------------------------------
# Status, cancellation and logs
# -------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def xcore_job_states(handle_kind: str, handles: Sequence[JobHandle]) -> Sequence[JobState] | None:
    """Report the current state of many jobs, ideally with one backend query.

    Called by ``get_status``, ``wait_until_complete`` and the ``show``/``list``/``wait``
    commands, possibly from a process other than the launcher. Stops at first non-None result.

    :param handle_kind: the registered kind of every handle.
    :param handles: handles returned by ``xcore_launch``, possibly from an earlier process.
    :return: one JobState per handle, same order; None if the kind is not yours.
    """


@hookspec(firstresult=True)
def xcore_cancel(handle_kind: str, handles: Sequence[JobHandle]) -> bool | None:
    """Stop jobs (and everything they started). Jobs already finished are left as they are.

    Called by ``xcore cancel`` and ``unit.stop()``, possibly from a process other than the
    launcher. Stops at first non-None result.

    :param handle_kind: the registered kind of every handle.
    :param handles: handles of jobs to stop.
    :return: True once cancellation was requested; None if the kind is not yours.
    """


@hookspec(firstresult=True)
def xcore_job_logs(handle_kind: str, handle: JobHandle, follow: bool) -> Iterator[str] | None:
    """Stream a job's output (stdout and stderr) as text chunks.

    Called by ``xcore logs``. Stops at first non-None result.

    :param handle_kind: the registered kind of the handle.
    :param handle: the job's handle.
    :param follow: keep yielding new output until the job ends.
    :return: an iterator of text; None if the kind is not yours.
    """


# -------------------------------------------------------------------------------------------
# Metadata
# -------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def xcore_open_store(url: str, options: dict[str, Any]) -> MetadataStore | None:
    """Open the metadata store named by ``url`` (``XCORE_STORE``; default: SQLite in XCORE_HOME).

    The built-in plugin answers ``sqlite:`` and ``postgresql://`` URLs; a plugin may answer
    others. Stops at first non-None result.

    :param url: the store's URL (it may hold a password: show it only through
        ``xcore.redaction.redact_url``).
    :param options: extra settings: ``migrate`` (bool) asks to migrate an older schema
        (``xcore store migrate``); absent means the store's default.
    :return: an object implementing ``xcore.store.MetadataStore``, or None.
    """
