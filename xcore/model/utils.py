"""Small public helpers with XManager's names: ``ShellSafeArg`` and ``run_in_asyncio_loop``."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from xcore.model import datamodel

ReturnT = TypeVar("ReturnT")


@datamodel.frozen
class ShellSafeArg:
    """An argument that ``to_list()`` does not quote, so a shell that runs the command line
    may expand it (``ShellSafeArg('$HOME')``).

    xcore never runs argv through a shell, so the text reaches a Binary or PythonModule job
    unchanged; only a ``CommandList`` entrypoint, which is shell text, expands it.
    """

    arg: str

    def __str__(self) -> str:
        raise RuntimeError(f"Converting {self!r} to a string would drop its shell-safe meaning; use .arg.")


def run_in_asyncio_loop(f: Callable[..., Awaitable[ReturnT]]) -> Callable[..., ReturnT]:
    """Turn an ``async def`` function into a plain one that runs it in a new event loop
    (for ``main`` functions and tests)."""

    @functools.wraps(f)
    def decorated(*args: Any, **kwargs: Any) -> ReturnT:
        import asyncio  # here, not at import: every status poll imports this module, few run a loop

        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(f(*args, **kwargs))
        finally:
            loop.close()

    return decorated
