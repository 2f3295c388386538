"""Helpers that build ``Packageable`` objects, with XManager's names and signatures."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from xcore.model.args import UserArgs
from xcore.model.executables import (
    Binary,
    BinaryDependency,
    CommandList,
    Container,
    Dockerfile,
    ModuleName,
    PythonContainer,
    PythonModule,
)
from xcore.model.job_blocks import ExecutorSpec, Packageable


def binary(
    executor_spec: ExecutorSpec,
    path: str | os.PathLike[str],
    dependencies: Sequence[BinaryDependency] = (),
    *,
    args: UserArgs = None,
    env_vars: Mapping[str, Any] | None = None,
) -> Packageable:
    """An executable file (or a command on PATH) to run as is."""
    return Packageable(Binary(path, tuple(dependencies)), executor_spec, args, env_vars)


def python_module(
    executor_spec: ExecutorSpec,
    module: str,
    path: str | os.PathLike[str] = ".",
    *,
    python: str | None = None,
    args: UserArgs = None,
    env_vars: Mapping[str, Any] | None = None,
) -> Packageable:
    """``python -m module`` from the project at ``path`` (xcore addition)."""
    return Packageable(PythonModule(module, path, python), executor_spec, args, env_vars)


def container(
    executor_spec: ExecutorSpec,
    image_path: str,
    *,
    args: UserArgs = None,
    env_vars: Mapping[str, Any] | None = None,
) -> Packageable:
    """An existing container image."""
    return Packageable(Container(image_path), executor_spec, args, env_vars)


def python_container(
    executor_spec: ExecutorSpec,
    entrypoint: ModuleName | CommandList,
    path: str | os.PathLike[str] = ".",
    base_image: str | None = None,
    docker_instructions: Sequence[str] | None = None,
    use_deep_module: bool = False,
    *,
    args: UserArgs = None,
    env_vars: Mapping[str, Any] | None = None,
) -> Packageable:
    """A Python project built into a container image."""
    spec = PythonContainer(entrypoint, path, base_image, docker_instructions, use_deep_module)
    return Packageable(spec, executor_spec, args, env_vars)


def dockerfile_container(
    executor_spec: ExecutorSpec,
    path: str | os.PathLike[str] = ".",
    dockerfile: str | None = None,
    *,
    args: UserArgs = None,
    env_vars: Mapping[str, Any] | None = None,
) -> Packageable:
    """An image built from a Dockerfile."""
    return Packageable(Dockerfile(path, dockerfile), executor_spec, args, env_vars)
