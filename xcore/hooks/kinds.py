"""The registry of kinds: each plugin registers its classes under names it owns.

A kind is ``"<plugin>.<Name>"`` by convention (``"xhpc.Slurm"``), so an unknown kind
names the plugin, and so the distribution (``xcore-xhpc``), that provides it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

from xcore.errors import DuplicateKindError, UnknownKindError
from xcore.hooks.execution import JobHandle
from xcore.launch.job_blocks import Executable, ExecutableSpec, Executor, ExecutorSpec

if TYPE_CHECKING:  # only annotations use it
    from attrs import AttrsInstance

CATEGORIES: dict[type, str] = {
    Executor: "executor",
    ExecutorSpec: "executor spec",
    ExecutableSpec: "executable spec",
    Executable: "executable",
    JobHandle: "job handle",
}


@attrs.frozen
class KindEntry:
    kind: str
    cls: type[AttrsInstance]  # add() accepts attrs classes only
    plugin: str
    category: str


def category_of(cls: type) -> str:
    for base, name in CATEGORIES.items():
        if issubclass(cls, base):
            return name
    bases = ", ".join(b.__name__ for b in CATEGORIES)
    raise TypeError(f"{cls.__qualname__} cannot be registered as a kind: subclass one of {bases}.")


class KindRegistry:
    """Maps kind names to classes and back; filled by ``xcore_register_kinds`` hooks."""

    def __init__(self) -> None:
        self._by_kind: dict[str, KindEntry] = {}
        self._by_class: dict[type, KindEntry] = {}
        self.unknown_hint: Any = None  # set by the plugin host to explain missing plugins

    def scoped(self, plugin: str) -> KindRegistrar:
        return KindRegistrar(self, plugin)

    def add(self, kind: str, cls: type, plugin: str) -> None:
        category = category_of(cls)
        if not attrs.has(cls):
            raise TypeError(f"Kind {kind!r}: {cls.__qualname__} must be an attrs class so it can be stored.")
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
        entry = KindEntry(kind, cls, plugin, category)
        self._by_kind[kind] = entry
        self._by_class[cls] = entry

    def entry(self, kind: str) -> KindEntry:
        try:
            return self._by_kind[kind]
        except KeyError:
            raise UnknownKindError(self._explain_unknown(kind)) from None

    def kind_of(self, cls_or_obj: Any) -> str:
        cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
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

    def __iter__(self) -> Iterator[KindEntry]:
        return iter(sorted(self._by_kind.values(), key=lambda e: e.kind))

    def _installed_sentence(self) -> str:
        plugins = sorted({e.plugin for e in self._by_kind.values()})
        return f"Installed plugins: {', '.join(plugins) or 'none'}."

    def _explain_unknown(self, kind: str) -> str:
        plugin = kind.split(".", 1)[0] if "." in kind else kind
        why = self.unknown_hint(plugin) if self.unknown_hint else None
        return (
            f"No installed plugin provides kind {kind!r}. {self._installed_sentence()} "
            + (why or f"It belongs to plugin {plugin!r}: install it with `pip install xcore-{plugin}`.")
        )


@attrs.frozen
class KindRegistrar:
    """What a plugin's ``xcore_register_kinds`` hook receives.

    - ``add(kind, cls)``: register an attrs subclass of ``Executor``, ``ExecutorSpec``,
      ``ExecutableSpec``, ``Executable`` or ``JobHandle`` under ``kind`` (``"<plugin>.<Name>"``).
    - ``plugin``: the name your plugin was loaded under (its entry-point name).
    """

    _registry: KindRegistry
    plugin: str

    def add(self, kind: str, cls: type) -> None:
        self._registry.add(kind, cls, self.plugin)
