"""The plugin host: loads plugins, knows who owns which kind, and calls hooks through a
small typed facade so the rest of xcore never touches pluggy directly. Each facade call goes
to the one object serving the job's kind: the ``Backend`` that declared it (plugin API 1.1),
or else the hook implementations of the plugin that registered it (1.0).

Environment switches (read when the host is created):

- ``XCORE_PLUGINS=a,b``: load only these entry-point plugins (empty: none, built-ins only).
- ``XCORE_DISABLE_PLUGINS=a,b``: do not load these.

Installed plugins are found from entry-point metadata when the host is created but imported
only the first time something needs them (a kind, a hook, ``xcore plugins``), so commands
that need no plugin (``xcore --help``, ``xcore list`` on the built-in store) import none.
Plugins may declare their CLI commands in the ``xcore.commands`` entry-point group
(``NAME = "module:add_parser"``) so ``xcore --help`` lists them without importing them, and
their kinds in ``xcore.kinds`` (``KIND = PLUGIN``): a kind then imports only the plugin that
declares it (a status poll of Slurm jobs imports xhpc alone). Plugins that declare no kinds
are imported whenever any kind is needed, as they may register any; a kind declared by two
plugins, or registered by a plugin other than the one declaring it, is a
``DuplicateKindError``, and a plugin registering other kinds than it declares fails to load.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from xcore.errors import (
    DuplicateKindError,
    LaunchError,
    PackagingError,
    PluginLoadError,
    UnknownKindError,
    XcoreError,
)
from xcore.hooks import specs as hookspecs
from xcore.hooks.entry_points import (
    COMMANDS_GROUP,
    KINDS_GROUP,
    PLUGINS_GROUP,
    EntryPoint,
    declared_commands,
    plugin_filter,
    scan,
)
from xcore.hooks.kinds import KindRegistry
from xcore.model import datamodel

if TYPE_CHECKING:
    import argparse

    from xcore.hooks.backend import Backend
    from xcore.hooks.serialization import Serializer
    from xcore.model.execution import JobHandle, LaunchContext, LaunchFailure, LaunchRequest, PackagingContext
    from xcore.model.job_blocks import Executable, Packageable
    from xcore.model.shell import ShellCommand
    from xcore.model.status import JobState
    from xcore.store import MetadataStore

ENTRY_POINT_GROUP = PLUGINS_GROUP

PLUGIN_API_VERSION = "1.1"
"""The hook contract this core implements: ``MAJOR.MINOR``. A plugin declares the version it
was written for as ``XCORE_PLUGIN_API = "1.1"`` in its hook module; the core loads it when the
majors match and the plugin's minor is not newer than the core's. 1.1 added ``Backend`` (the
class form of the execution hooks, ``KindRegistrar.add_backend``); 1.0 plugins still load."""


def api_version_problem(plugin: object) -> str | None:
    """Why ``plugin`` cannot run on this core (None when it can, or declares nothing)."""
    declared = getattr(plugin, "XCORE_PLUGIN_API", None)
    if declared is None:
        return None
    try:
        major, minor = (int(part) for part in str(declared).split("."))
    except ValueError:
        return (f"declares XCORE_PLUGIN_API = {declared!r}, which is not a version like "
                f"{PLUGIN_API_VERSION!r}; fix the plugin.")
    core_major, core_minor = (int(part) for part in PLUGIN_API_VERSION.split("."))
    if major != core_major or minor > core_minor:
        return (f"was written for xcore plugin API {declared}, but this xcore implements "
                f"{PLUGIN_API_VERSION}; install a version of the plugin built for plugin API "
                f"{core_major}.x, or an xcore that implements {declared}.")
    return None


def _with_packageable_args(executable: Executable, packageable: Packageable) -> Executable:
    """The packaged executable carrying the packageable's default args (when the plugin set
    none) and env vars (where the plugin set no value of its own: a plugin that derived a
    variable from the user's, like ``PYTHONPATH``, keeps its result)."""
    args = executable.args if executable.args else packageable.args
    env = {**packageable.env_vars, **executable.env_vars}
    if args is executable.args and env == executable.env_vars:
        return executable
    return attrs.evolve(executable, args=args, env_vars=env)


@datamodel.define
class PluginInfo:
    """One plugin as ``xcore plugins`` shows it."""

    name: str
    distribution: str | None = None
    version: str | None = None
    builtin: bool = False
    hooks: list[str] = attrs.field(factory=list)
    kinds: list[str] = attrs.field(factory=list)
    status: str = "loaded"  # loaded, failed, disabled
    error: str | None = None

    @property
    def label(self) -> str:
        dist = f"{self.distribution} {self.version}" if self.distribution else "built in"
        return f"{self.name!r} ({dist})"


def _package_of(ep: EntryPoint) -> str:
    """The top-level package of a plugin's entry point (``xhpc.hooks`` -> ``xhpc``)."""
    return ep.value.split(":")[0].strip().split(".")[0]


class PluginHost:
    """Builds the PluginManager; one per process is enough (see ``get_host``)."""

    def __init__(self, env: Mapping[str, str] | None = None, *, load_entry_points: bool = True) -> None:
        self._env = os.environ if env is None else env
        self._pm = pluggy.PluginManager("xcore")
        self._pm.add_hookspecs(hookspecs)
        self._infos: dict[str, PluginInfo] = {}
        self._kinds: KindRegistry | None = None
        self._declares: dict[str, set[str]] = {}  # plugin -> the kinds its metadata declares
        self._deferred: set[str] = set()  # imported plugins whose declared kinds are not registered yet
        self._packages: dict[str, str] = {"xcore": "xcore"}  # imported plugin -> its top-level package
        self._serializer: Serializer | None = None
        from xcore.hooks import builtin

        self.register(builtin, name="xcore", builtin=True)
        self._entry_points: list[EntryPoint] = (
            scan({PLUGINS_GROUP, COMMANDS_GROUP, KINDS_GROUP}) if load_entry_points else [])
        self._to_load: dict[str, EntryPoint] = {}  # enabled plugins not imported yet, by name
        self._started = False  # whether some installed plugin was imported
        self._lock = threading.RLock()  # threads (package_async) may need kinds at the same time
        self._select_entry_points()

    @property
    def pm(self) -> pluggy.PluginManager:
        self.load_plugins()
        return self._pm

    @property
    def infos(self) -> dict[str, PluginInfo]:
        self.load_plugins()
        return self._infos

    @property
    def _pending(self) -> bool:
        return bool(self._to_load)

    @property
    def loaded(self) -> bool:
        """Whether some installed plugin was imported (they are, on first need)."""
        return self._started

    def load_plugins(self) -> None:
        """Import every installed plugin not imported yet. The kinds of one that declares them
        (``xcore.kinds``) are registered when one is first needed, not here (a tracker hook call
        needs no executor classes); one whose kinds do not match its declaration is marked failed
        then (``xcore plugins`` and the CLI's warnings say so) and the others are still used."""
        with self._lock:
            for name in list(self._to_load):
                try:
                    self._load_entry_point(name)
                except XcoreError:
                    if self._infos[name].status != "failed":
                        raise

    def declared_commands(self) -> dict[str, EntryPoint]:
        """CLI commands plugins declare in metadata (``xcore.commands``), without importing them."""
        return declared_commands(self._env, self._entry_points)

    # -- loading -------------------------------------------------------------------------

    def register(self, plugin: object, name: str, *, builtin: bool = False, distribution: str | None = None,
                 version: str | None = None) -> None:
        """Register a plugin object (module or instance); used for built-ins and by tests."""
        info = PluginInfo(name, distribution, version, builtin)
        self._infos[name] = info
        problem = api_version_problem(plugin)
        if problem:
            info.status, info.error = "failed", f"{info.label} {problem}"
            return
        try:
            self._pm.register(plugin, name=name)
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            if self._pm.is_registered(plugin):
                self._pm.unregister(plugin)
            info.status, info.error = "failed", f"{exc}"
            return
        info.hooks = sorted(
            impl_name for impl_name, caller in vars(self._pm.hook).items()
            if not impl_name.startswith("_") and any(i.plugin_name == name for i in caller.get_hookimpls()))
        if self._kinds is not None:
            if name in self._declares:  # e.g. imported for a tracker hook: kinds registered when one is needed
                self._deferred.add(name)
            else:
                self._register_kinds_of(self._kinds, name)

    def _select_entry_points(self) -> None:
        """Which installed plugins to import (on need): disabled ones are listed as such now."""
        enabled = plugin_filter(self._env)
        plugins = [ep for ep in self._entry_points if ep.group == ENTRY_POINT_GROUP]
        for ep in sorted(plugins, key=lambda e: e.name):
            if ep.name in self._infos or ep.name in self._to_load:
                continue  # the same name from two distributions: the first wins
            if not enabled(ep.name):
                self._infos[ep.name] = PluginInfo(ep.name, ep.distribution, ep.version, status="disabled")
            else:
                self._to_load[ep.name] = ep

    def _load_entry_point(self, name: str) -> None:
        """Import one installed plugin and register it (and its kinds, if the registry exists)."""
        with self._lock:
            ep = self._to_load.pop(name, None)
            if ep is None:
                return
            self._started = True
            self._packages[name] = _package_of(ep)
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must not break unrelated commands
                self._infos[ep.name] = PluginInfo(
                    ep.name, ep.distribution, ep.version, status="failed",
                    error=f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_exception(exc)[-3:]),
                )
                return
            self.register(plugin, ep.name, distribution=ep.distribution, version=ep.version)

    def failures(self) -> list[PluginInfo]:
        return [info for info in self.infos.values() if info.status == "failed"]

    def failure_warnings(self) -> list[str]:
        """One paragraph per plugin that failed to load (of those imported so far: a command
        that needed one plugin warns about that one), for the CLI to print."""
        return [
            f"warning: plugin {info.label} failed to load and is skipped: "
            f"{(info.error or '').splitlines()[0]} (hide it with XCORE_DISABLE_PLUGINS={info.name})"
            for info in self._infos.values() if info.status == "failed"
        ]

    # -- kinds ---------------------------------------------------------------------------

    @property
    def kinds(self) -> KindRegistry:
        """The kind registry: the kinds of each plugin that declares no kinds (it may register
        any); a declared kind is registered when first needed, importing the plugin declaring it
        if no hook call (e.g. a tracker's) imported it already."""
        if self._kinds is None:
            with self._lock:
                if self._kinds is None:
                    self._kinds = self._build_kinds()
        return self._kinds

    def _build_kinds(self) -> KindRegistry:
        registry = KindRegistry()
        registry.unknown_hint = self._why_missing
        registry.installed = lambda: [*self._infos, *self._to_load]
        registry.declared, self._declares = self._declarations()
        for name, info in list(self._infos.items()):
            if info.status != "loaded":
                continue
            if name in self._declares:
                self._deferred.add(name)  # its kinds are registered when one is needed
            else:
                self._register_kinds_of(registry, name)
        for name in [n for n in self._to_load if n not in self._declares]:
            self._load_entry_point(name)  # registers nothing yet: self._kinds is None
            if self._infos[name].status == "loaded":
                self._register_kinds_of(registry, name)
        registry.loader = self
        return registry

    def _declarations(self) -> tuple[dict[str, str], dict[str, set[str]]]:
        """From ``xcore.kinds`` metadata: kind -> the enabled plugin declaring it, and plugin ->
        its declared kinds. Two plugins declaring one kind is an error naming both."""
        chosen = {name: ep for name, ep in self._to_load.items()}
        chosen.update({name: EntryPoint(name, "", PLUGINS_GROUP, i.distribution, i.version)
                       for name, i in self._infos.items() if i.distribution and not i.builtin})
        from xcore.hooks import builtin

        by_kind: dict[str, str] = {}
        declares: dict[str, set[str]] = {}
        if self._infos.get("xcore", PluginInfo("xcore")).builtin:
            by_kind = dict.fromkeys(builtin.KINDS, "xcore")
            declares["xcore"] = set(builtin.KINDS)
        for ep in self._entry_points:
            if ep.group != KINDS_GROUP:
                continue
            plugin = chosen.get(ep.value)
            if plugin is None or plugin.distribution != ep.distribution:
                continue  # a disabled plugin, or another distribution's plugin of that name
            if self._infos.get(ep.value, PluginInfo(ep.value)).status == "disabled":
                continue
            other = by_kind.setdefault(ep.name, ep.value)
            if other != ep.value:
                raise DuplicateKindError(
                    f"Kind {ep.name!r} is declared by two plugins: {other!r} "
                    f"({chosen[other].distribution if other in chosen else 'built in'}) and "
                    f"{ep.value!r} ({ep.distribution}), in their xcore.kinds entry points. Uninstall or disable one "
                    f"of them (XCORE_DISABLE_PLUGINS={ep.value}).")
            declares.setdefault(ep.value, set()).add(ep.name)
        return by_kind, declares

    def _register_kinds_of(self, registry: KindRegistry, name: str) -> None:
        """Run ``name``'s ``xcore_register_kinds`` into ``registry`` and check it registered
        exactly the kinds it declares. A plugin that declares kinds and fails this is marked
        failed (later lookups of its kinds say why) and the error raised; a plugin declaring
        none may have broken any kind, so its error is raised by every lookup (the registry is
        not kept), as before lazy loading."""
        try:
            for impl in self._pm.hook.xcore_register_kinds.get_hookimpls():
                if impl.plugin_name != name:
                    continue
                try:
                    impl.function(registry=registry.scoped(name))
                except XcoreError:
                    raise
                except Exception as exc:
                    raise PluginLoadError(
                        f"Plugin {self._infos[name].label} failed to register its kinds: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
            declared = self._declares.get(name)
            registered = registry.kinds_of(name)
            if declared is not None and registered != declared:
                missing, extra = sorted(declared - registered), sorted(registered - declared)
                raise PluginLoadError(
                    f"Plugin {self._infos[name].label} registers other kinds than its xcore.kinds entry points "
                    "declare: " + "; ".join(
                        part for part in (f"declared, not registered: {', '.join(missing)}" if missing else "",
                                          f"registered, not declared: {', '.join(extra)}" if extra else "") if part)
                    + ". Its pyproject.toml must list exactly the kinds its xcore_register_kinds hook adds "
                    f"([project.entry-points.\"xcore.kinds\"], KIND = \"{name}\"); fix and reinstall it.")
        except XcoreError as exc:
            registry.remove_plugin(name)
            if name in self._declares:
                info = self._infos[name]
                info.status, info.error, info.kinds = "failed", str(exc), []
                if self._pm.has_plugin(name):
                    self._pm.unregister(name=name)
            raise
        from xcore.hooks.backend import served_hooks

        info = self._infos[name]
        info.kinds = sorted(registered)
        info.hooks = sorted(set(info.hooks).union(*(served_hooks(b) for b in registry.backends_of(name))))

    # What the registry calls when it lacks a kind (KindLoader): import the plugin(s) that can
    # have it, never the others.

    def load_kind(self, kind: str) -> bool:
        owner = self._kinds.declared.get(kind) if self._kinds is not None else None
        if owner is None:
            return False  # no plugin declares it: none is imported to look for it
        with self._lock:
            self._load_entry_point(owner)  # (done already, maybe by another thread: then a no-op)
            self._register_deferred(owner)
        return True

    def _register_deferred(self, name: str, *, quiet: bool = False) -> None:
        """Register the kinds of an imported plugin that declares them. ``quiet``: one that
        fails is only marked failed (as ``load_plugins`` does), so the others are still registered."""
        if name in self._deferred and self._kinds is not None:
            self._deferred.discard(name)
            try:
                self._register_kinds_of(self._kinds, name)
            except XcoreError:
                if not quiet or self._infos[name].status != "failed":
                    raise

    def load_class(self, cls: type) -> bool:
        """A class of a plugin not imported yet: its package's plugin first, else all of them."""
        with self._lock:
            package = cls.__module__.split(".")[0]
            for name, ep in list(self._to_load.items()):
                if _package_of(ep) == package:
                    self._load_entry_point(name)
            for name in list(self._deferred):
                if self._packages.get(name) == package:
                    self._register_deferred(name, quiet=True)
            if self._kinds is not None and self._kinds.knows(cls):
                return True
            return self.load_all()

    def load_all(self) -> bool:
        with self._lock:
            self.load_plugins()
            for name in list(self._deferred):
                self._register_deferred(name, quiet=True)
        return True  # the registry looks again (another thread may have added it meanwhile)

    @property
    def serializer(self) -> Serializer:
        if self._serializer is None:
            from xcore.hooks.serialization import Serializer

            self._serializer = Serializer(self.kinds)
        return self._serializer

    def _why_missing(self, plugin: str) -> str | None:
        if plugin in self._to_load:
            try:
                self._load_entry_point(plugin)  # to say whether it loads at all
            except XcoreError:
                pass  # marked failed, with the reason, said below
        info = self._infos.get(plugin)
        if info is None:
            return None
        if info.status == "failed":
            return f"Plugin {info.label} is installed but failed to load: {(info.error or '').splitlines()[0]}"
        if info.status == "disabled":
            return f"Plugin {info.label} is installed but disabled by XCORE_PLUGINS/XCORE_DISABLE_PLUGINS."
        return f"Plugin {info.label} is loaded but does not register this kind; upgrade it."

    def _server(self, kind: str) -> tuple[Backend | None, str]:
        """Who serves ``kind``: the ``Backend`` object that declared it (None for a plugin that
        implements module-level hooks, plugin API 1.0), and the plugin's name. Imports the
        plugin that owns the kind (only that one, if declared)."""
        entry = self.kinds.entry(kind)
        return entry.backend, entry.plugin

    def _owner_hook(self, hook_name: str, owner: str) -> Any:
        """A hook caller that reaches only the plugin ``owner`` (plugin API 1.0 routing)."""
        with self._lock:  # not while another thread is registering a plugin
            others = [p for name, p in self._pm.list_name_plugin() if name != owner]
            return self._pm.subset_hook_caller(hook_name, remove_plugins=others)

    # -- facade: each call goes to the one backend (or plugin) serving the kind ------------

    def package(self, packageable: Packageable, context: PackagingContext) -> Executable:
        """Ask who owns the executor spec's kind (so plugins never check kinds; a spec no plugin
        registered is an error), then attach the packageable's args and env to the result, so
        plugins need not."""
        executable = None
        try:
            backend, owner = self._server(self.kinds.kind_of(packageable.executor_spec))
        except UnknownKindError:
            pass
        else:
            if backend is not None:
                executable = backend.package(packageable, context)
            else:
                executable = self._owner_hook("xcore_package", owner)(packageable=packageable, context=context)
        if executable is None:
            spec_kind = self._kind_or_name(packageable.executable_spec)
            executor_kind = self._kind_or_name(packageable.executor_spec)
            raise PackagingError(
                f"No installed plugin can package {spec_kind} for {executor_kind}. Loaded plugins: "
                f"{', '.join(sorted(i.name for i in self.infos.values() if i.status == 'loaded'))}. "
                "Install the plugin that runs this executor, or pick an executable spec it supports "
                "(`xcore plugins` lists what each plugin provides)."
            )
        return _with_packageable_args(executable, packageable)

    def _kind_or_name(self, obj: object) -> str:
        try:
            return repr(self.kinds.kind_of(obj))
        except UnknownKindError:
            return type(obj).__qualname__

    def launch(self, executor_kind: str, requests: Sequence[LaunchRequest],
               context: LaunchContext) -> list[JobHandle | LaunchFailure]:
        """One handle, or one ``LaunchFailure``, per request, in order."""
        from xcore.model.execution import JobHandle, LaunchFailure

        backend, owner = self._server(executor_kind)
        if backend is not None:
            handles = backend.launch(list(requests), context)
        else:
            handles = self._owner_hook("xcore_launch", owner)(
                executor_kind=executor_kind, requests=list(requests), context=context)
        if handles is None:
            raise LaunchError(f"Plugin {owner!r} registers executor kind {executor_kind!r} but does not launch it.")
        handles = list(handles)
        if len(handles) != len(requests):
            raise LaunchError(f"Plugin {owner!r} returned {len(handles)} handles for {len(requests)} jobs.")
        wrong = next((h for h in handles if not isinstance(h, (JobHandle, LaunchFailure))), None)
        if wrong is not None:
            raise LaunchError(f"Plugin {owner!r} returned {type(wrong).__name__} from xcore_launch; "
                              "return a JobHandle or a LaunchFailure per request.")
        return handles

    def adopt(self, executor_kind: str, requests: Sequence[LaunchRequest], context: LaunchContext
              ) -> list[JobHandle | None] | None:
        """Handles for the requests a dead launcher got to the backend (None: it did not);
        None when the owning plugin cannot tell."""
        backend, owner = self._server(executor_kind)
        if backend is not None:
            found = backend.adopt(list(requests), context)
        else:
            found = self._owner_hook("xcore_adopt", owner)(
                executor_kind=executor_kind, requests=list(requests), context=context)
        if found is None:
            return None
        found = list(found)
        if len(found) != len(requests):
            raise LaunchError(f"Plugin {owner!r} adopted {len(found)} handles for {len(requests)} jobs.")
        return found

    def job_states(self, handle_kind: str, handles: Sequence[JobHandle]) -> list[JobState]:
        backend, owner = self._server(handle_kind)
        if backend is not None:
            states = backend.states(list(handles))
        else:
            states = self._owner_hook("xcore_job_states", owner)(handle_kind=handle_kind, handles=list(handles))
        if states is None or len(states) != len(handles):
            raise UnknownKindError(f"Plugin {owner!r} does not report states for {handle_kind!r}"
                                   + ("." if states is None else f": {len(states)} states for {len(handles)} jobs."))
        return list(states)

    def wait_for_change(self, handle_kind: str, handles: Sequence[JobHandle], timeout: float) -> bool:
        """Let the owning plugin block until some job may have changed (``xcore_wait_for_change``);
        False if it cannot tell, and the caller sleeps instead."""
        backend, owner = self._server(handle_kind)
        if backend is not None:
            return bool(backend.wait_for_change(list(handles), timeout))
        caller = self._owner_hook("xcore_wait_for_change", owner)
        return caller(handle_kind=handle_kind, handles=list(handles), timeout=timeout) is not None

    def cancel(self, handle_kind: str, handles: Sequence[JobHandle]) -> None:
        backend, owner = self._server(handle_kind)
        if backend is not None:
            backend.cancel(list(handles))
        elif self._owner_hook("xcore_cancel", owner)(handle_kind=handle_kind, handles=list(handles)) is None:
            raise UnknownKindError(f"Plugin {owner!r} cannot cancel jobs of kind {handle_kind!r}.")

    def job_logs(self, handle_kind: str, handle: JobHandle, follow: bool) -> Iterator[str]:
        backend, owner = self._server(handle_kind)
        if backend is not None:
            chunks = backend.logs(handle, follow)
        else:
            chunks = self._owner_hook("xcore_job_logs", owner)(handle_kind=handle_kind, handle=handle, follow=follow)
        if chunks is None:
            raise UnknownKindError(f"Plugin {owner!r} cannot show logs of {handle_kind!r} jobs.")
        return chunks

    def job_log_lines(self, handle_kind: str, handles: Sequence[JobHandle],
                      marker: str) -> list[list[str] | None] | None:
        """Per handle the log lines holding ``marker`` (``xcore_job_log_lines``), or None when the
        owning plugin does not batch log reads (the caller reads each log)."""
        backend, owner = self._server(handle_kind)
        if backend is not None:
            found = backend.log_lines(list(handles), marker)
        else:
            found = self._owner_hook("xcore_job_log_lines", owner)(
                handle_kind=handle_kind, handles=list(handles), marker=marker)
        if found is None:
            return None
        found = list(found)
        if len(found) != len(handles):
            raise PluginLoadError(f"Plugin {owner!r} returned {len(found)} logs for {len(handles)} jobs "
                                  f"from xcore_job_log_lines (one per handle, in order).")
        return found

    def job_shell(self, handle_kind: str, handle: JobHandle, command: list[str] | None) -> ShellCommand:
        """The program ``xcore shell`` runs to get into the job (``xcore_job_shell``)."""
        backend, owner = self._server(handle_kind)
        if backend is not None:
            plan = backend.shell(handle, command)
        else:
            plan = self._owner_hook("xcore_job_shell", owner)(handle_kind=handle_kind, handle=handle, command=command)
        if plan is None:
            raise UnknownKindError(f"Plugin {owner!r} cannot open a shell in {handle_kind!r} jobs; see its "
                                   "documentation for how to reach a running job.")
        return plan

    def job_env(self, handle_kind: str, handle: JobHandle) -> dict[str, str] | None:
        """The job's real environment as the backend kept it (``xcore_job_env``); None when gone
        or not kept."""
        backend, owner = self._server(handle_kind)
        if backend is not None:
            return backend.env(handle)
        found = self._owner_hook("xcore_job_env", owner)(handle_kind=handle_kind, handle=handle)
        return None if found is None else dict(found)

    def open_store(self, url: str, options: dict[str, Any] | None = None) -> MetadataStore:
        if url.startswith("sqlite:") and self._pending:  # the built-in store: no plugin import needed
            from xcore.store.sqlite import open_url

            return open_url(url)

        from xcore.store.redaction import redact_url

        store = self.pm.hook.xcore_open_store(url=url, options=options or {})
        if store is None:
            raise PluginLoadError(
                f"No installed plugin opens the metadata store {redact_url(url)!r} (XCORE_STORE). The built-in store "
                "takes sqlite:///PATH; other databases need the plugin that provides them."
            )
        return store

    def add_commands(self, subparsers: argparse._SubParsersAction) -> None:
        """Commands of plugins that do not declare theirs in metadata (those are added by name)."""
        declared = {ep.distribution for ep in self.declared_commands().values()}
        skip = [p for name, p in self.pm.list_name_plugin() if name in self.infos
                and self.infos[name].distribution in declared]
        self.pm.subset_hook_caller("xcore_add_commands", remove_plugins=skip)(subparsers=subparsers)

    def plugins(self) -> list[PluginInfo]:
        self.load_plugins()
        try:
            list(self.kinds)  # builds the registry of every plugin; a kind conflict raises here
        except Exception as exc:  # show the conflict instead of failing the listing
            for info in self.infos.values():
                if info.status == "loaded" and info.name in str(exc):
                    info.error = str(exc)
        return sorted(self.infos.values(), key=lambda i: (not i.builtin, i.name))


_host: PluginHost | None = None


def get_host() -> PluginHost:
    """The process's plugin host, created on first use (never at import time)."""
    global _host
    if _host is None:
        _host = PluginHost()
    return _host


def built_host() -> PluginHost | None:
    """The process's plugin host if it was built, without building one."""
    return _host


def reset_host(host: PluginHost | None = None) -> None:
    """Replace the process's host (tests, or after installing a plugin)."""
    global _host
    _host = host
