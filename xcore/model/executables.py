"""Backend-neutral executable specs, as in XManager's ``xm.executables``.

Each is plain data; which backend can package it is decided by the packaging hooks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from xcore.model import datamodel
from xcore.model.job_blocks import ExecutableSpec
from xcore.paths import from_launch_dir


def name_from_path(path: str) -> str:
    """An executable's name from a path, label or image reference, as XManager derives it:
    the last path component, every non-word character replaced by ``_`` (``image.tar`` ->
    ``image_tar``, ``//path/to:train`` -> ``to_train``, ``gcr.io/p/img:v1`` -> ``img_v1``).
    Names become job and image names."""
    return re.sub(r"\W", "_", os.path.basename(path.rstrip(os.sep)))


def _str_path(value: str | os.PathLike[str]) -> str:
    """A project or file path: relative ones are taken from the launch script's directory."""
    return from_launch_dir(value)


def _command_path(value: str | os.PathLike[str]) -> str:
    """A file next to the launch script, a relative path from there, or a command on PATH."""
    text = os.fspath(value)
    return from_launch_dir(text, only_if_exists=os.sep not in text)


def to_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    """``converter=tuple`` as a Python function: attrs reads a converter's signature, and for
    a builtin that means tokenizing its text signature (compiling tokenize's patterns, ~2 ms
    of every launch's start-up)."""
    return tuple(value)


def to_list(value: Iterable[Any]) -> list[Any]:
    """``converter=list``, for the same reason as ``to_tuple``."""
    return list(value)


def _optional_file(value: str | os.PathLike[str] | None) -> str | None:
    """A Dockerfile: from the launch script's directory when it is there, else as given (the
    build context's own directory is searched when packaging)."""
    return None if value is None else from_launch_dir(value, only_if_exists=True)


@datamodel.frozen
class ModuleName:
    """An entrypoint that runs ``python -m module_name``."""

    module_name: str


@datamodel.frozen
class CommandList:
    """An entrypoint that runs shell commands in order; ``"$@"`` receives the job's args."""

    commands: list[str] = attrs.field(converter=to_list)


Entrypoint = ModuleName | CommandList


@datamodel.frozen
class BinaryDependency:
    """A file the binary needs next to it (XManager name; copied by backends that ship files)."""

    path: str = attrs.field(converter=_str_path)


@datamodel.frozen
class Binary(ExecutableSpec):
    """An executable file, or a command name looked up on PATH when packaged."""

    path: str = attrs.field(converter=_command_path)
    dependencies: tuple[BinaryDependency, ...] = attrs.field(default=(), converter=to_tuple)

    @property
    def name(self) -> str:
        return name_from_path(self.path)


@datamodel.frozen
class PythonModule(ExecutableSpec):
    """``python -m module`` with ``path`` put first on PYTHONPATH (xcore addition)."""

    module: str
    path: str = attrs.field(default=".", converter=_str_path)
    python: str | None = None

    @property
    def name(self) -> str:
        return self.module.rsplit(".", 1)[-1]


@datamodel.frozen
class Container(ExecutableSpec):
    """An existing container image."""

    image_path: str

    @property
    def name(self) -> str:
        return name_from_path(self.image_path)


@datamodel.frozen
class PythonContainer(ExecutableSpec):
    """A Python project at ``path`` built into an image on ``base_image``."""

    entrypoint: ModuleName | CommandList
    path: str = attrs.field(default=".", converter=_str_path)
    base_image: str | None = None
    docker_instructions: tuple[str, ...] | None = attrs.field(
        default=None, converter=lambda v: None if v is None else tuple(v)
    )
    use_deep_module: bool = False

    @property
    def name(self) -> str:
        return name_from_path(os.path.abspath(self.path))


@datamodel.frozen
class Dockerfile(ExecutableSpec):
    """An image built from a build context and a Dockerfile (default: ``path/Dockerfile``)."""

    path: str = attrs.field(default=".", converter=_str_path)
    dockerfile: str | None = attrs.field(default=None, converter=_optional_file)

    def __attrs_post_init__(self) -> None:
        if self.dockerfile is None:  # XManager's default: the Dockerfile in the build context
            object.__setattr__(self, "dockerfile", os.path.join(self.path, "Dockerfile"))

    @property
    def name(self) -> str:
        return name_from_path(os.path.abspath(self.path))


def entrypoint_argv(entrypoint: Entrypoint, python: str = "python3") -> Sequence[str]:
    """The argv prefix an entrypoint runs; job args are appended by the caller."""
    if isinstance(entrypoint, ModuleName):
        return [python, "-m", entrypoint.module_name]
    # Commands run in one shell; "$@" inside them receives the job's args, passed as
    # positional parameters (never pasted into the script text).
    return ["/bin/sh", "-c", "\n".join(entrypoint.commands), "xcore-entrypoint"]
