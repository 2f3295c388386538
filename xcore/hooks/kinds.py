"""The registry of kinds: each plugin registers its classes under names it owns.

A kind is ``"<plugin>.<Name>"`` by convention (``"xhpc.Slurm"``), so an unknown kind
names the plugin, and so the distribution (``xcore-xhpc``), that provides it.

The registry is filled on demand: the plugin host gives it a ``loader`` that imports the
plugin declaring a kind (``xcore.kinds`` entry points) the first time that kind is needed,
and ``declared`` (kind -> plugin), so a plugin registering a kind another plugin declares is
caught even while that other plugin is not imported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from xcore.errors import DuplicateKindError, UnknownKindError
from xcore.model import datamodel
from xcore.model.execution import JobHandle
from xcore.model.job_blocks import Executable, ExecutableSpec, Executor, ExecutorSpec

if TYPE_CHECKING:  # only annotations use them
    from attrs import AttrsInstance

    from xcore.hooks.backend import Backend

CATEGORIES: dict[type, str] = {
    Executor: "executor",
    ExecutorSpec: "executor spec",
    ExecutableSpec: "executable spec",
    Executable: "executable",
    JobHandle: "job handle",
}


@datamodel.frozen
class KindEntry:
    kind: str
    cls: type[AttrsInstance]  # add() accepts attrs classes only
    plugin: str
    category: str
    backend: Backend | None = None  # the object serving this kind (plugin API 1.1), else the plugin's hooks


def category_of(cls: type) -> str:
    for base, name in CATEGORIES.items():
        if issubclass(cls, base):
            return name
    bases = ", ".join(b.__name__ for b in CATEGORIES)
    raise TypeError(f"{cls.__qualname__} cannot be registered as a kind: subclass one of {bases}.")


class KindLoader(Protocol):
    """Imports plugins on demand; each method returns whether the registry should look again."""

    def load_kind(self, kind: str) -> bool: ...

    def load_class(self, cls: type) -> bool: ...

    def load_all(self) -> bool: ...


class KindRegistry:
    """Maps kind names to classes and back; filled by ``xcore_register_kinds`` hooks."""

    def __init__(self) -> None:
        self._by_kind: dict[str, KindEntry] = {}
        self._by_class: dict[type, KindEntry] = {}
        self.unknown_hint: Any = None  # set by the plugin host to explain missing plugins
        self.loader: KindLoader | None = None
        self.declared: dict[str, str] = {}  # kind -> the plugin whose metadata declares it
        self.installed: Callable[[], list[str]] | None = None  # every enabled plugin, loaded or not

    def scoped(self, plugin: str) -> KindRegistrar:
        return KindRegistrar(self, plugin)

    def add(self, kind: str, cls: type, plugin: str, backend: Backend | None = None) -> None:
        category = category_of(cls)
        if not attrs.has(cls):
            raise TypeError(f"Kind {kind!r}: {cls.__qualname__} must be an attrs class so it can be stored.")
        owner = self.declared.get(kind, plugin)
        if owner != plugin:
            raise DuplicateKindError(
                f"Kind {kind!r} is claimed by two plugins: {owner!r} (declared in its xcore.kinds entry "
                f"points) and {plugin!r} ({cls.__module__}.{cls.__qualname__}). Uninstall or disable one of "
                f"them (XCORE_DISABLE_PLUGINS={plugin})."
            )
        existing = self._by_kind.get(kind)
        if existing is not None and existing.cls is not cls:
            raise DuplicateKindError(
                f"Kind {kind!r} is claimed by two plugins: {existing.plugin!r} "
                f"({existing.cls.__module__}.{existing.cls.__qualname__}) and {plugin!r} "
                f"({cls.__module__}.{cls.__qualname__}). Uninstall or disable one of them "
                f"(XCORE_DISABLE_PLUGINS={plugin})."
            )
        if cls in self._by_class and self._by_class[cls].kind != kind:
            raise DuplicateKindError(
                f"{cls.__qualname__} is registered twice, as {self._by_class[cls].kind!r} and {kind!r}.")
        attrs.resolve_types(cls)
        entry = KindEntry(kind, cls, plugin, category, backend)
        self._by_kind[kind] = entry
        self._by_class[cls] = entry

    def entry(self, kind: str) -> KindEntry:
        entry = self._by_kind.get(kind)
        if entry is None and self.loader is not None and self.loader.load_kind(kind):
            entry = self._by_kind.get(kind)
        if entry is None:
            raise UnknownKindError(self._explain_unknown(kind))
        return entry

    def kind_of(self, cls_or_obj: Any) -> str:
        cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
        entry = self._by_class.get(cls)
        if entry is None and self.loader is not None and self.loader.load_class(cls):
            entry = self._by_class.get(cls)
        if entry is None:
            raise UnknownKindError(
                f"{category_of(cls).capitalize()} {cls.__module__}.{cls.__qualname__} is not registered by any "
                f"installed plugin. {self._installed_sentence()} A plugin registers its classes in its "
                "xcore_register_kinds hook: registry.add('myplugin.MyExecutor', MyExecutor)."
            )
        return entry.kind

    def owner(self, kind: str) -> str:
        return self.entry(kind).plugin

    def knows(self, cls: type) -> bool:
        return cls in self._by_class

    def kinds_of(self, plugin: str) -> set[str]:
        """The kinds ``plugin`` registered (without loading anything)."""
        return {kind for kind, entry in self._by_kind.items() if entry.plugin == plugin}

    def backends_of(self, plugin: str) -> list[Backend]:
        """The backend objects serving ``plugin``'s kinds, in the order they were added."""
        found: dict[int, Backend] = {}
        for entry in self._by_kind.values():
            if entry.plugin == plugin and entry.backend is not None:
                found.setdefault(id(entry.backend), entry.backend)
        return list(found.values())

    def remove_plugin(self, plugin: str) -> None:
        """Forget what ``plugin`` registered (it failed to register all of them correctly)."""
        for kind in self.kinds_of(plugin):
            entry = self._by_kind.pop(kind)
            self._by_class.pop(entry.cls, None)

    def __iter__(self) -> Iterator[KindEntry]:
        if self.loader is not None:
            self.loader.load_all()
        return iter(sorted(self._by_kind.values(), key=lambda e: e.kind))

    def _installed_sentence(self) -> str:
        plugins = sorted(set(self.installed() if self.installed else ()) | {e.plugin for e in self._by_kind.values()})
        return f"Installed plugins: {', '.join(plugins) or 'none'}."

    def _explain_unknown(self, kind: str) -> str:
        plugin = self.declared.get(kind) or (kind.split(".", 1)[0] if "." in kind else kind)
        why = self.unknown_hint(plugin) if self.unknown_hint else None
        return (
            f"No installed plugin provides kind {kind!r}. {self._installed_sentence()} "
            + (why or f"It belongs to plugin {plugin!r}: install it with `pip install xcore-{plugin}`.")
        )


@datamodel.frozen
class KindRegistrar:
    """What a plugin's ``xcore_register_kinds`` hook receives.

    - ``add(kind, cls)``: register an attrs subclass of ``Executor``, ``ExecutorSpec``,
      ``ExecutableSpec``, ``Executable`` or ``JobHandle`` under ``kind`` (``"<plugin>.<Name>"``).
    - ``add_backend(backend)``: register the classes of a ``xcore.plugin.Backend`` (its
      ``kinds``), each as ``"<plugin>.<ClassName>"``, and let that object serve their jobs.
    - ``plugin``: the name your plugin was loaded under (its entry-point name).
    """

    _registry: KindRegistry
    plugin: str

    def add(self, kind: str, cls: type) -> None:
        self._registry.add(kind, cls, self.plugin)

    def add_backend(self, backend: Backend) -> None:
        """Register ``backend.kinds``; the host then calls ``backend``'s methods for their jobs.
        A backend lacking a method one of its kinds needs (``launch`` for an executor, ...)
        is refused here, when the plugin loads, rather than at the first job."""
        from xcore.hooks.backend import Backend, missing_methods

        if not isinstance(backend, Backend):
            raise TypeError(f"add_backend takes a Backend instance, not {backend!r}.")
        name = type(backend).__qualname__
        if not backend.kinds:
            raise TypeError(f"{name} declares no kinds: list its classes in {name}.kinds.")
        for cls in backend.kinds:
            missing = missing_methods(backend, category_of(cls))
            if missing:
                raise TypeError(f"{name} serves the {category_of(cls)} {cls.__qualname__} but does not "
                                f"implement {', '.join(missing)}: write those methods, or move the class "
                                "to a backend that has them.")
        for cls in backend.kinds:
            self._registry.add(f"{self.plugin}.{cls.__name__}", cls, self.plugin, backend)
