"""XManager's ``xm.utils``: ``ShellSafeArg``, ``ARG_ESCAPER``, ``run_in_asyncio_loop`` and
``resolve_path_relative_to_launcher`` (which lxm3 launchers and Dockerfile defaults use).

xcore finds the launch script as ``xcore.paths.launch_script`` says: the script ``xcore
launch`` runs, else the file ``python script.py`` runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from xcore import paths
from xcore.model import datamodel

ReturnT = TypeVar("ReturnT")


class SpecialArg:
    """Base class of arguments that rendering treats specially (XManager's name)."""


@datamodel.frozen
class ShellSafeArg(SpecialArg):
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


def ARG_ESCAPER(value: Any) -> str:  # noqa: N802 - XManager's name
    """How ``SequentialArgs.to_list()`` renders one value by default: shell-quoted, except a
    ``ShellSafeArg`` (its text as is); an enum by its name."""
    import enum
    import shlex

    if isinstance(value, ShellSafeArg):
        return value.arg
    if isinstance(value, enum.Enum):
        return shlex.quote(str(value.name))
    return shlex.quote(str(value))


def trivial_kwargs_joiner(key: str, value: str) -> str:
    """Joins a keyword argument's name and value with ``=`` (XManager's name)."""
    return f"{key}={value}"


def find_launch_script_path() -> str:
    """The absolute path of the running launch script, or '' when there is none (a REPL,
    ``python -m``)."""
    script = paths.launch_script()
    return os.path.abspath(script) if script is not None else ""


def resolve_path_relative_to_launcher(path: str | os.PathLike[str]) -> str:
    """``path`` as an absolute path, a relative one taken from the launch script's directory
    (so ``'.'`` and ``'..'`` name the script's own directory and its parent), symlinks
    resolved, as XManager's. An absolute path is returned as given.

    Raises RuntimeError when there is no launch script to be relative to.
    """
    text = os.fspath(path)
    if os.path.isabs(text):
        return text
    script = find_launch_script_path()
    if not script or not os.access(script, os.R_OK):
        raise RuntimeError(
            f"Unable to determine the launch script's path to resolve {text!r} against"
            + (f": the script is not present at {script!r} (did the script change directory?)." if script
               else ": run the script as `python script.py` or `xcore launch script.py`, or give an absolute path."))
    return os.path.realpath(os.path.join(os.path.dirname(os.path.realpath(script)), text))
