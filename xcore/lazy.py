"""Lazy public names for a package, so importing it stays cheap (PEP 562)."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing is not imported at startup
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``__getattr__`` and ``__dir__`` for ``package`` that import ``name`` from
    ``exports[name]`` (a module path) on first use and cache it in the package. A name whose
    module path ends in ``.name`` (``"core": "xcore.launch.core"``) is that module itself."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        imported = importlib.import_module(module)
        value = imported if module.rpartition(".")[2] == name else getattr(imported, name)  # a module
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(exports) | {n for n in namespace if not n.startswith("_")})

    return __getattr__, __dir__
