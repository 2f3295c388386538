"""The plugin API: everything a backend plugin imports, from one module.

Quick start, a complete executor in one file (``myplugin/hooks.py``): one ``Backend`` object
serves the kinds it lists, and the plugin hands it to the core when its kinds are needed::

    import subprocess, sys
    import attrs
    from xcore import plugin as xp

    XCORE_PLUGIN_API = "1.1"              # the plugin API this module is written for

    @attrs.frozen
    class MySpec(xp.ExecutorSpec): ...

    @attrs.define(kw_only=True)
    class My(xp.Executor):
        Spec = MySpec

    @attrs.define(kw_only=True)
    class MyExecutable(xp.Executable):
        command: list[str]

    @attrs.define
    class MyHandle(xp.JobHandle):          # inherits log_path and error (keyword-only)
        pid: int
        rc_path: str

    class MyBackend(xp.Backend):
        kinds = (My, MySpec, MyExecutable, MyHandle)   # each is the kind "my.<ClassName>"

        def package(self, packageable, context):       # called for MySpec only
            spec = packageable.executable_spec
            if isinstance(spec, xp.PythonModule):
                return MyExecutable(name=spec.name, command=[sys.executable, "-m", spec.module])
            raise xp.PackagingError(f"my: cannot run {type(spec).__name__}; use xm.python_module.")

        def launch(self, requests, context):
            ...  # start each request; return one MyHandle (log_path=...) or LaunchFailure(reason) each

        def states(self, handles): ...      # -> [xp.exit_state(rc, started_at=..., ended_at=...) ...]
        def cancel(self, handles): ...      # mark_cancelled(...), then signal
        def logs(self, handle, follow):     # -> iterator of str
            return xp.follow_file(handle.log_path, follow=follow, finished=lambda: ...)

    @xp.hookimpl
    def xcore_register_kinds(registry: xp.KindRegistrar) -> None:
        registry.add_backend(MyBackend())

Name the module in your ``pyproject.toml``, with the kinds it serves::

    [project.entry-points.xcore]
    my = "myplugin.hooks"

    [project.entry-points."xcore.kinds"]
    "my.My" = "my"                         # ... and my.MySpec, my.MyExecutable, my.MyHandle

and test it with the contract suite: a ``xcore_contract_target`` fixture returning a
``ContractTarget`` and a ``class TestContract(ContractSuite): pass`` in your tests (see
``xcore.testing.contract``). ``xcore plugin new NAME`` generates all of this;
``docs/plugins.md`` is the tutorial and the rules of the contract (what a forgotten job reads
as, which exceptions hooks may raise, log decoding, cancel, env, exit codes);
``xcore/hooks/specs.py`` documents every hook (each ``Backend`` method's docstring names its
hook). Module-level hook functions (``@xp.hookimpl def xcore_launch(executor_kind, ...)``,
plugin API 1.0) still work.

What this module exports:

- hooks and registration: ``Backend``, ``hookimpl``, ``KindRegistrar``, ``PLUGIN_API_VERSION``,
  ``XcorePluginDeprecationWarning``;
- the model a plugin subclasses or receives: ``Executor``, ``ExecutorSpec``, ``Executable``,
  ``ExecutableSpec``, ``Packageable``, ``JobRequirements``, ``ResourceType``,
  ``SequentialArgs``, the built-in specs ``Binary``, ``PythonModule``, ``Container``,
  ``PythonContainer``, ``Dockerfile``, ``ModuleName``, ``CommandList``, and
  ``entrypoint_argv`` (the argv prefix a ``ModuleName`` or ``CommandList`` entrypoint runs);
  ``to_requirements`` (a ``JobRequirements`` from any form an executor field accepts);
  ``Distributed`` and ``to_distributed`` (an executor's ``distributed`` field), and the pure
  helpers ``distributed_env``, ``role_env``, ``role_variable`` and ``tf_config`` (see docs/gangs.md);
  write your own classes with plain ``attrs`` (``define`` and ``frozen`` here are deprecated:
  the core's fast path saved a plugin's few classes about a millisecond, see
  ``bench/bench_seams.py``);
- Bazel targets: the specs ``BazelBinary`` and ``BazelContainer``, and ``bazel_workspace``,
  ``bazel_build`` and ``bazel_output`` to build them with the ``bazel`` on PATH;
- requests, contexts and results: ``LaunchRequest``, ``LaunchContext``, ``PackagingContext``,
  ``JobHandle``, ``LaunchFailure``, ``JobState``, ``Status``, ``Progress``, ``MetadataStore``,
  ``ShellCommand`` (what ``shell`` returns: the program ``xcore shell`` runs);
- errors: ``XcoreError``, ``ConfigurationError``, ``PackagingError``, ``LaunchError``,
  ``UnknownKindError``, ``PluginLoadError``, ``ResourceSpecError``, ``BackendUnavailableError``
  (raise it from ``states`` when the backend is out of reach for now: a wait keeps waiting);
- places: ``xcore_home``, ``config_dir``, ``plugin_state_dir``; ``from_launch_dir`` (a
  relative path in a launch script, taken from the script's directory); ``lazy_exports`` for
  cheap package imports;
- plumbing (``xcore.plumbing``): ``follow_file``, ``follow_bytes``, ``read_file_from``,
  ``decode_chunks``, ``TextDecoder``; ``atomic_write``, ``private_dir``; ``mark_cancelled``,
  ``cancel_requested``, ``cancelled_at``; ``exit_state``, ``lost_state``, ``describe_exit``,
  ``signal_name``, ``signal_exit_code``, ``normalize_exit_code``, ``launch_failure_message``;
  retries (``docs/long-runs.md``): ``Retry``, ``FAILURE_CLASSES``, ``Attempt``, ``failed_state``
  (a FAILED state with its failure class), ``checkpoint_dir``, ``attempt_env``,
  ``ATTEMPT_VAR``, ``CHECKPOINT_VAR``;
  ``DEFAULT_IGNORE_PATTERNS``, ``IGNORED_ANYWHERE``, ``IGNORED_AT_TOP``, ``is_ignored``,
  ``iter_project_files``; ``DigestCache``, ``file_digest``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xcore.lazy import lazy_exports

_EXPORTS = {
    "Backend": "xcore.hooks.backend",
    "hookimpl": "xcore.hooks.markers",
    "KindRegistrar": "xcore.hooks.kinds",
    "PLUGIN_API_VERSION": "xcore.hooks.host",
    "XcorePluginDeprecationWarning": "xcore.hooks.specs",
    # the model
    "define": "xcore.model.datamodel",
    "frozen": "xcore.model.datamodel",
    "Executor": "xcore.model.job_blocks",
    "ExecutorSpec": "xcore.model.job_blocks",
    "Executable": "xcore.model.job_blocks",
    "ExecutableSpec": "xcore.model.job_blocks",
    "Packageable": "xcore.model.job_blocks",
    "JobRequirements": "xcore.model.resources",
    "ResourceType": "xcore.model.resources",
    "SequentialArgs": "xcore.model.args",
    "Binary": "xcore.model.executables",
    "PythonModule": "xcore.model.executables",
    "Container": "xcore.model.executables",
    "PythonContainer": "xcore.model.executables",
    "Dockerfile": "xcore.model.executables",
    "ModuleName": "xcore.model.executables",
    "CommandList": "xcore.model.executables",
    "entrypoint_argv": "xcore.model.executables",
    "BazelBinary": "xcore.model.bazel",
    "BazelContainer": "xcore.model.bazel",
    "bazel_workspace": "xcore.model.bazel",
    "bazel_build": "xcore.model.bazel",
    "bazel_output": "xcore.model.bazel",
    "to_requirements": "xcore.model.job_blocks",
    "Distributed": "xcore.model.distributed",
    "to_distributed": "xcore.model.distributed",
    "distributed_env": "xcore.model.distributed",
    "role_env": "xcore.model.distributed",
    "role_variable": "xcore.model.distributed",
    "tf_config": "xcore.model.distributed",
    # requests, contexts and results
    "LaunchRequest": "xcore.model.execution",
    "LaunchContext": "xcore.model.execution",
    "PackagingContext": "xcore.model.execution",
    "JobHandle": "xcore.model.execution",
    "LaunchFailure": "xcore.model.execution",
    "launch_failure_message": "xcore.model.execution",
    "ShellCommand": "xcore.model.shell",
    "JobState": "xcore.model.status",
    "Status": "xcore.model.status",
    "Progress": "xcore.progress",
    "MetadataStore": "xcore.store",
    # errors
    "XcoreError": "xcore.errors",
    "ConfigurationError": "xcore.errors",
    "PackagingError": "xcore.errors",
    "LaunchError": "xcore.errors",
    "UnknownKindError": "xcore.errors",
    "PluginLoadError": "xcore.errors",
    "ResourceSpecError": "xcore.errors",
    "BackendUnavailableError": "xcore.errors",
    # places
    "xcore_home": "xcore.paths",
    "config_dir": "xcore.paths",
    "plugin_state_dir": "xcore.paths",
    "from_launch_dir": "xcore.paths",
    "lazy_exports": "xcore.lazy",
    # plumbing
    "follow_file": "xcore.plumbing.logs",
    "follow_bytes": "xcore.plumbing.logs",
    "read_file_from": "xcore.plumbing.logs",
    "decode_chunks": "xcore.plumbing.logs",
    "TextDecoder": "xcore.plumbing.logs",
    "atomic_write": "xcore.plumbing.files",
    "private_dir": "xcore.plumbing.files",
    "mark_cancelled": "xcore.plumbing.cancel",
    "cancel_requested": "xcore.plumbing.cancel",
    "cancelled_at": "xcore.plumbing.cancel",
    "exit_state": "xcore.plumbing.exits",
    "lost_state": "xcore.plumbing.exits",
    "describe_exit": "xcore.plumbing.exits",
    "signal_name": "xcore.plumbing.exits",
    "signal_exit_code": "xcore.plumbing.exits",
    "normalize_exit_code": "xcore.plumbing.exits",
    "failed_state": "xcore.plumbing.exits",
    "Retry": "xcore.model.retry",
    "FAILURE_CLASSES": "xcore.model.status",
    "Attempt": "xcore.model.status",
    "checkpoint_dir": "xcore.plumbing.attempts",
    "attempt_env": "xcore.plumbing.attempts",
    "ATTEMPT_VAR": "xcore.plumbing.attempts",
    "CHECKPOINT_VAR": "xcore.plumbing.attempts",
    "DEFAULT_IGNORE_PATTERNS": "xcore.plumbing.ignore",
    "IGNORED_ANYWHERE": "xcore.plumbing.ignore",
    "IGNORED_AT_TOP": "xcore.plumbing.ignore",
    "is_ignored": "xcore.plumbing.ignore",
    "iter_project_files": "xcore.plumbing.ignore",
    "DigestCache": "xcore.plumbing.digests",
    "file_digest": "xcore.plumbing.digests",
}

__all__ = sorted(_EXPORTS)

_getattr, __dir__ = lazy_exports(__name__, _EXPORTS)


def __getattr__(name: str) -> object:
    if name in ("define", "frozen"):
        import warnings

        warnings.warn(f"xcore.plugin.{name} is deprecated: use attrs.{name} (the core's own fast path "
                      "saves a plugin's few classes no measurable time).", _getattr("XcorePluginDeprecationWarning"),
                      stacklevel=2)
    if name == "xcore_home":  # paths.home under a name that says whose home it is
        from xcore.paths import home

        globals()[name] = home
        return home
    return _getattr(name)


if TYPE_CHECKING:
    from xcore.errors import (
        BackendUnavailableError,
        ConfigurationError,
        LaunchError,
        PackagingError,
        PluginLoadError,
        ResourceSpecError,
        UnknownKindError,
        XcoreError,
    )
    from xcore.hooks.backend import Backend
    from xcore.hooks.host import PLUGIN_API_VERSION
    from xcore.hooks.kinds import KindRegistrar
    from xcore.hooks.markers import hookimpl
    from xcore.hooks.specs import XcorePluginDeprecationWarning
    from xcore.lazy import lazy_exports
    from xcore.model.args import SequentialArgs
    from xcore.model.bazel import BazelBinary, BazelContainer, bazel_build, bazel_output, bazel_workspace
    from xcore.model.datamodel import define, frozen
    from xcore.model.distributed import (
        Distributed,
        distributed_env,
        role_env,
        role_variable,
        tf_config,
        to_distributed,
    )
    from xcore.model.executables import (
        Binary,
        CommandList,
        Container,
        Dockerfile,
        ModuleName,
        PythonContainer,
        PythonModule,
        entrypoint_argv,
    )
    from xcore.model.execution import (
        JobHandle,
        LaunchContext,
        LaunchFailure,
        LaunchRequest,
        PackagingContext,
        launch_failure_message,
    )
    from xcore.model.job_blocks import Executable, ExecutableSpec, Executor, ExecutorSpec, Packageable, to_requirements
    from xcore.model.resources import JobRequirements, ResourceType
    from xcore.model.retry import Retry
    from xcore.model.shell import ShellCommand
    from xcore.model.status import FAILURE_CLASSES, Attempt, JobState, Status
    from xcore.paths import config_dir, from_launch_dir, plugin_state_dir
    from xcore.paths import home as xcore_home
    from xcore.plumbing.attempts import ATTEMPT_VAR, CHECKPOINT_VAR, attempt_env, checkpoint_dir
    from xcore.plumbing.cancel import cancel_requested, cancelled_at, mark_cancelled
    from xcore.plumbing.digests import DigestCache, file_digest
    from xcore.plumbing.exits import (
        describe_exit,
        exit_state,
        failed_state,
        lost_state,
        normalize_exit_code,
        signal_exit_code,
        signal_name,
    )
    from xcore.plumbing.files import atomic_write, private_dir
    from xcore.plumbing.ignore import (
        DEFAULT_IGNORE_PATTERNS,
        IGNORED_ANYWHERE,
        IGNORED_AT_TOP,
        is_ignored,
        iter_project_files,
    )
    from xcore.plumbing.logs import TextDecoder, decode_chunks, follow_bytes, follow_file, read_file_from
    from xcore.progress import Progress
    from xcore.store import MetadataStore
