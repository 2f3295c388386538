"""Every hook a plugin can implement, grouped by what it is for, and the rules of the contract.

Implement a hook with ``@hookimpl`` (``from xcore.plugin import hookimpl``) in a module or
class that your distribution names under the ``xcore`` entry-point group::

    [project.entry-points.xcore]
    myplugin = "myplugin.hooks"

and declare the plugin API you target in that module: ``XCORE_PLUGIN_API = "1.1"``. A plugin
whose major version differs from the core's ``PLUGIN_API_VERSION``, or whose minor version is
newer, is not loaded; ``xcore plugins`` shows it as failed with a one-line reason.

Implementations may accept a subset of a hook's arguments, so hooks can gain arguments
without breaking plugins. A hook that is going away is marked with pluggy's
``warn_on_impl=XcorePluginDeprecationWarning(...)``: implementing it warns when the plugin
is registered, naming the replacement, for at least one minor version before removal.

Routing: every hook that takes a kind, packaging included, is called only on the plugin
that registered that kind (for ``xcore_package``, the executor spec's kind). A plugin never
needs to check kind strings; returning None from a routed hook is an error the core reports.

Backends (plugin API 1.1): the execution hooks (``xcore_package`` to ``xcore_job_env``) are
best written as the methods of an ``xcore.plugin.Backend`` (``package``, ``launch``,
``adopt``, ``states``, ``wait_for_change``, ``cancel``, ``logs``, ``env``: the same arguments without
the kind), which ``xcore_register_kinds`` hands to the core with ``registry.add_backend``; the
host then calls the one backend that declared a job's kind. The docstrings below are the
reference for both forms.

The rules, the same for every backend
-------------------------------------

- **Exceptions.** Raise an ``xcore.plugin.XcoreError`` subclass (``PackagingError``,
  ``LaunchError``, ``ConfigurationError``) with a message that says what to fix: the user
  sees ``error: <message>`` without a traceback. From ``xcore_launch`` any exception means
  *nothing of the batch was submitted*: every job is recorded FAILED (``launch failed:
  <Type>: <message>``). From ``xcore_job_states``, ``XcoreError`` and ``OSError`` mean the
  backend cannot be asked now: the jobs read UNKNOWN with the reason and keep their stored
  state. Any other exception is a bug in the plugin and is shown with its traceback.
- **A job that failed to start** while others of its batch were submitted: return
  ``LaunchFailure(reason)`` in its place (or a handle with ``error`` set). It is recorded as
  FAILED, ``failed to launch: <reason>``.
- **A forgotten job** (the backend answers but no longer knows it: purged accounting,
  removed container, deleted state) reads ``FAILED`` with the message ``lost: <why>`` and no
  exit code (``xcore.plugin.lost_state``). ``UNKNOWN`` is only for a backend that cannot be
  asked right now; it is not terminal, so the core keeps asking.
- **Exit codes.** ``JobState.exit_code`` is the program's own code; a job killed by signal N
  reads ``128 + N`` with the message ``killed by signal N (SIGNAME)``; never negative
  (``xcore.plugin.exit_state``). A cancelled job reads CANCELLED (unless it had already
  exited 0).
- **Logs** are ``str`` chunks decoded from UTF-8 incrementally, so no character is split
  across chunks; invalid bytes become U+FFFD. ``follow=False`` ends after the output written
  so far; ``follow=True`` ends when the job is terminal and all its output was yielded
  (``xcore.plugin.follow_file`` / ``follow_bytes`` implement this).
- **Cancel** requests the stop and may block at most for the executor's documented grace
  period (seconds, not the job's run time). It is idempotent; jobs already ended are left as
  they are; a job stopped by cancel reads CANCELLED from any process (write a cancel marker
  before signalling, ``xcore.plugin.mark_cancelled``).
- **Env.** ``LaunchRequest.env`` holds the job's own variables only, never the launcher's
  environment; inheriting the launcher's environment is a documented choice of the backend.
  Args and env values reach the program byte for byte, never through a shell line.
- **From any process.** Status, cancel and logs are called with handles loaded from the
  store, often in a process other than the launcher: keep in the handle (and the plugin's
  ``LaunchContext.state_dir``) everything they need.
- **Failures and attempts.** A FAILED job says why in ``JobState.failure`` (``preempted``,
  ``node_failure``, ``timeout``, ``out_of_memory``, ``error``, ``lost``, ``launch``;
  ``xcore.plugin.failed_state``); none reads ``error``. Apply ``LaunchRequest.retry`` where the
  backend can retry by itself, and report the attempt it is on (``JobState.attempt``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from xcore.hooks.kinds import KindRegistrar
    from xcore.model.execution import JobHandle, LaunchContext, LaunchFailure, LaunchRequest, PackagingContext
    from xcore.model.job_blocks import Executable, Packageable
    from xcore.model.shell import ShellCommand
    from xcore.model.status import JobState
    from xcore.model.tracking import JobTracking, TrackedJob
    from xcore.store import MetadataStore

from xcore.hooks.markers import hookspec


class XcorePluginDeprecationWarning(DeprecationWarning):
    """Warned when a plugin implements a deprecated hook (pluggy's ``warn_on_impl``)."""


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
def xcore_add_commands(subparsers: argparse._SubParsersAction) -> None:
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
    """Turn an executable spec into a packaged executable for an executor spec you own.

    Called once per distinct packageable in ``experiment.package``, only on the plugin that
    registered ``packageable.executor_spec``'s kind. Stops at first non-None result.

    :param packageable: ``executable_spec`` (what to run: ``xcore.plugin.PythonModule``,
        ``Binary``, ``Container``... or your own spec), ``executor_spec`` (your spec),
        ``args`` and ``env_vars`` (defaults for every job of this executable).
    :param context: ``cache_dir`` (shared cache root; use a subdirectory) and ``progress``.
    :return: your packaged executable. The core attaches ``packageable.args`` (when the
        executable has none) and ``packageable.env_vars`` (those the executable does not set
        itself: a value you derived from the user's, like ``PYTHONPATH``, is kept) itself.
        Return None only if you cannot package this spec: the user then gets an error
        naming the spec and the executor.
    :raises xcore.plugin.PackagingError: with a message that says what to fix.
    """


# -------------------------------------------------------------------------------------------
# Execution
# -------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def xcore_launch(
    executor_kind: str, requests: Sequence[LaunchRequest], context: LaunchContext
) -> Sequence[JobHandle | LaunchFailure] | None:
    """Submit a batch of jobs that all use executors of one kind.

    The core collects every job added in a burst, so a sweep arrives here as one call and
    can become one submission (an array job, one API batch). Called only on the plugin that
    registered ``executor_kind``.

    :param executor_kind: the registered kind of every request's executor.
    :param requests: the jobs (``LaunchRequest``: ids, ``job_name``, ``executable``,
        ``executor``, final argv strings in ``args``, the job's own ``env``; see its docstring).
    :param context: ``state_dir`` (your plugin's private, persistent directory),
        ``progress`` and ``experiment_title``.
    :return: per request, in the same order, a ``JobHandle`` (set ``log_path``) or a
        ``LaunchFailure(reason)`` for a job that was not submitted while others were.
    :raises xcore.plugin.LaunchError: if nothing was submitted. Raise only when no job of the
        batch reached the backend, so that nothing submitted goes unrecorded.
    """


@hookspec(firstresult=True)
def xcore_adopt(
    executor_kind: str, requests: Sequence[LaunchRequest], context: LaunchContext
) -> Sequence[JobHandle | None] | None:
    """Find what a launcher that died during ``xcore_launch`` got to the backend.

    Called once, by whichever later process (``xcore list``/``show``/``wait``/...) notices the
    launcher's lease expired, for the jobs it was submitting when it stopped. Write enough
    before or while submitting (e.g. the job ids next to the backend's own ids) to answer.
    Stops at first non-None result.

    :param executor_kind: the registered kind of every request's executor.
    :param requests: the jobs as recorded; ``env`` is the stored (redacted) environment.
    :param context: the same state directory ``xcore_launch`` got.
    :return: per request, in order, its handle if the job reached the backend, else None
        (it is then marked failed to launch, and an identity relaunch runs it); None if the
        kind is not yours or you cannot tell.
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
    :param handles: handles returned by ``xcore_launch``, loaded from the store (JSON), possibly
        in a later process.
    :return: one ``JobState(status, message, exit_code, started_at, ended_at)`` per handle,
        same order. A job the backend no longer knows: ``lost_state(why)`` (FAILED). Exit
        codes and signals: ``exit_state(code, cancelled=...)``.
    :raises OSError or xcore.plugin.XcoreError: the backend cannot be asked now; the jobs read
        UNKNOWN with the reason and keep their stored state.
    """


@hookspec(firstresult=True)
def xcore_wait_for_change(handle_kind: str, handles: Sequence[JobHandle], timeout: float) -> bool | None:
    """Optional: block until some of these active jobs may have changed state, at most ``timeout`` s.

    Called between status polls of ``xcore wait``, ``launch --wait`` and
    ``wait_until_complete``, so a backend that can be told when jobs end (a local runner, an
    event stream) is answered at once instead of at the next poll. Returning early costs one
    extra ``xcore_job_states``; never return early for nothing, or the wait spins. Not
    implemented (None): the core sleeps ``timeout``. Stops at first non-None result.

    :param handle_kind: the registered kind of every handle.
    :param handles: handles of jobs the last poll saw active.
    :param timeout: seconds to wait at most.
    :return: True once it waited.
    """


@hookspec(firstresult=True)
def xcore_cancel(handle_kind: str, handles: Sequence[JobHandle]) -> bool | None:
    """Stop jobs (and everything they started). Jobs already finished are left as they are.

    Called by ``xcore cancel`` and ``unit.stop()``, possibly from a process other than the
    launcher. Stops at first non-None result.

    :param handle_kind: the registered kind of every handle.
    :param handles: handles of jobs to stop (some may have ended already: leave those).
    :return: True once cancellation was requested. It may block at most for the executor's
        grace period; the job must then read CANCELLED from any process.
    """


@hookspec(firstresult=True)
def xcore_job_logs(handle_kind: str, handle: JobHandle, follow: bool) -> Iterator[str] | None:
    """Stream a job's output (stdout and stderr) as text chunks.

    Called by ``xcore logs``. Stops at first non-None result.

    :param handle_kind: the registered kind of the handle.
    :param handle: the job's handle, loaded from the store.
    :param follow: keep yielding new output until the job is terminal and all of it was read.
    :return: an iterator of ``str`` chunks decoded incrementally from UTF-8 (never a split
        character; invalid bytes as U+FFFD): ``xcore.plugin.follow_file`` does it for a file.
    """



@hookspec(firstresult=True)
def xcore_job_log_lines(handle_kind: str, handles: Sequence[JobHandle], marker: str) -> list[list[str] | None] | None:
    """Optional: the lines holding ``marker`` in each job's output so far, for many jobs at once.

    Called to read the trial results (``XCORE_RESULT`` lines) of the jobs that ended while no
    one looked: after a week away, ``xcore ui`` and ``xcore show`` read thousands of logs, and
    a backend that reaches its logs over the network should do that in one round trip per
    host (a grep over SSH), not one per job. Not implemented (None): the core reads each job
    with ``xcore_job_logs``. Stops at first non-None result.

    :param handle_kind: the registered kind of every handle.
    :param handles: handles of jobs, ended or running.
    :param marker: the text the wanted lines contain (returning more lines is allowed: the
        caller keeps those that start with it).
    :return: per handle, in order, the lines (without line ends; an absent log has none), or
        None for a log that cannot be read now (asked again later).
    """


@hookspec(firstresult=True)
def xcore_job_shell(handle_kind: str, handle: JobHandle, command: list[str] | None) -> ShellCommand | None:
    """How to open a shell, or run one command, inside a running job: its allocation, its
    environment, its working directory.

    Called by ``xcore shell`` for a job that is running (the core checks first). Stops at first
    non-None result.

    :param handle_kind: the registered kind of the handle.
    :param handle: the job's handle, loaded from the store.
    :param command: the program and arguments to run, as the user typed them after ``--``;
        None for an interactive shell. Never join them into a shell line: quote each one
        (``shlex.quote``) where a remote shell reads them.
    :return: a ``ShellCommand`` (argv, cwd, env) that ``xcore shell`` replaces itself with,
        with the terminal attached; None when this plugin cannot open shells in its jobs.
        Raise ``XcoreError`` with a message saying why not and what to do instead when this
        job cannot have one (a cluster without the means, a job that is gone).
    """


@hookspec(firstresult=True)
def xcore_job_env(handle_kind: str, handle: JobHandle) -> dict[str, str] | None:
    """Optional: the job's real environment (``LaunchRequest.env``, unredacted), where the
    backend keeps it privately (xlocal's 0600 batch file, a cluster's 0600 task file).

    The store keeps secrets redacted; ``xcore retry`` (running a failed unit again from any
    process) and the core's relaunch of a preempted job need the real values. Called only on
    the plugin that registered ``handle_kind``. Stops at first non-None result.

    :param handle_kind: the registered kind of the handle.
    :param handle: the job's handle, loaded from the store.
    :return: the job's own variables as launched; None when they are gone (or not kept): the
        core then refuses to rerun a job whose stored environment holds redacted values,
        naming them, and never runs it with ``<redacted>``.
    """


# -------------------------------------------------------------------------------------------
# Retries (docs/long-runs.md)
#
# No hook of its own beyond ``xcore_job_env``: a backend reads the policy from
# ``LaunchRequest.retry`` and the attempt from ``LaunchRequest.attempt``, exports
# ``XCORE_ATTEMPT``/``XCORE_CHECKPOINT_DIR`` (``xcore.plugin.attempt_env``), and reports
# ``JobState.failure`` (the class of a failure), ``attempt`` and ``previous_attempts``. A
# backend that retries natively keeps the job ACTIVE between attempts; one that does not
# reports the FAILED attempt with its class, and an observing xcore process relaunches it.
# -------------------------------------------------------------------------------------------


# -------------------------------------------------------------------------------------------
# Trackers
# -------------------------------------------------------------------------------------------


@hookspec
def xcore_job_tracking(job: TrackedJob) -> JobTracking | None:
    """Add environment variables and links to a job, for an experiment tracker.

    Called for every job when it is recorded, before it is launched, on every plugin (not
    routed by kind: a tracker works with any backend); the answers are merged. The built-in
    W&B, Neptune and TensorBoard integrations (``xcore.trackers.builtin``) use it.

    :param job: ``xcore.trackers.TrackedJob``: experiment id, title and tags, work unit id,
        job name, the unit's args, the job's own ``env`` and the launcher's ``launcher_env``
        (where a tracker's settings are read); ``run_group``/``run_name`` give the names to use.
    :return: ``xcore.trackers.JobTracking(env={...}, links={"mytracker": url})``, or None to add
        nothing. Env never overrides a variable the user set for the job; secret-named
        variables are redacted in the store like any other. Links are stored with the job and
        shown by ``xcore show`` and ``xcore ui``. Import no tracker library here: it need
        not be installed where xcore runs.
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
        ``xcore.store.redaction.redact_url``).
    :param options: extra settings: ``migrate`` (bool) asks to migrate an older schema
        (``xcore store migrate``); absent means the store's default.
    :return: an object implementing ``xcore.store.MetadataStore``, or None.
    """


# -------------------------------------------------------------------------------------------
# Notifications
# -------------------------------------------------------------------------------------------


@hookspec
def xcore_notification_sinks() -> Mapping[str, Callable[[Any], Any]] | None:
    """Notification sink types this plugin adds, by the ``type`` name that ``config.toml`` uses.

    Called only when a ``[[notifications.sinks]]`` entry names a type that is not built in
    (``webhook``, ``slack``, ``email``, ``command``). Each value is a factory called with the
    entry (``.name``; ``.options``: its keys but the shared ones; ``.where``: the entry as an
    error names it; ``xcore.runtime.notifications.config.check_keys`` refuses unknown keys)
    that returns an object with ``send(event: dict, timeout: float) -> None``: deliver the
    event within ``timeout`` seconds or raise (the message, recorded and shown by ``xcore
    notifications``, must hold no secret). A failed send is retried with backoff by whichever
    observer runs next; each event reaches each sink once. See docs/notifications.md.

    :return: ``{type name: factory}``, or None. A name two plugins add is an error.
    """
