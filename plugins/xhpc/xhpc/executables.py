"""What to run on a cluster (specs) and what packaging makes of it (``ClusterExecutable``).

Specs (lxm3's names):

- ``PythonPackage``: a pip-installable project, built with ``pip install --no-deps -t`` into
  one archive; runs ``python3 -m module`` (or commands) with the archive on PYTHONPATH.
- ``UniversalPackage``: a build script that writes the files to ship into ``$BUILDDIR``.
- ``Fileset``: extra files to ship with a package (``{local_path: path_in_package}``).
- ``SingularityContainer``: run another spec (or a command) inside an Apptainer/Singularity
  image: a local ``.sif`` file (uploaded once) or a URI (``docker://...``).
- ``Command``: plain commands run on the cluster, nothing uploaded.

xcore's ``Binary``, ``PythonModule`` and ``Container`` specs work too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs

from xcore.plugin import CommandList, Executable, ExecutableSpec, ModuleName, from_launch_dir


def _path(value: str | os.PathLike[str]) -> str:
    return os.fspath(value)


def _project_path(value: str | os.PathLike[str]) -> str:
    """Relative project paths are taken from the launch script's directory (as in xcore)."""
    return from_launch_dir(value)


def _binds(value: Mapping[str, str]) -> dict[str, str]:
    """A private copy; a named function so that type checkers see the accepted type."""
    return dict(value)


def _tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        return (value,)
    return tuple(value)


@attrs.frozen
class Fileset(ExecutableSpec):
    """Files to ship: ``Fileset({"data/vocab.txt": "vocab.txt"})`` (local path -> path in the package)."""

    files: Mapping[str, str] = attrs.field(factory=dict, converter=lambda v: dict(sorted(dict(v).items())))

    @property
    def name(self) -> str:
        return "fileset"

    def get_path(self, name: str, executor_spec: Any = None) -> str:
        """Where the file shipped as ``name`` is found by the job (lxm3's method): the same
        relative path, since packages run from their own directory."""
        del executor_spec
        return name


@attrs.frozen
class PythonPackage(ExecutableSpec):
    """A pip-installable project at ``path``; ``entrypoint`` is ``xm.ModuleName`` or ``xm.CommandList``."""

    entrypoint: ModuleName | CommandList
    path: str = attrs.field(default=".", converter=_project_path)
    resources: tuple[Fileset, ...] = attrs.field(default=(), converter=_tuple)
    extra_packages: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    pip_args: tuple[str, ...] = attrs.field(default=("--no-deps", "--no-compile"), converter=_tuple)
    python: str = "python3"

    @property
    def name(self) -> str:
        if isinstance(self.entrypoint, ModuleName):
            return self.entrypoint.module_name.rsplit(".", 1)[-1]
        return os.path.basename(os.path.abspath(self.path)) or "package"


@attrs.frozen
class UniversalPackage(ExecutableSpec):
    """Files made by ``build_script`` (run in ``path`` with ``$BUILDDIR`` set); runs ``entrypoint``
    (argv, relative to the package directory) with the package directory as working directory."""

    entrypoint: tuple[str, ...] = attrs.field(converter=_tuple)
    build_script: str = attrs.field(converter=_path)
    build_args: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    path: str = attrs.field(default=".", converter=_project_path)

    @property
    def name(self) -> str:
        return os.path.basename(self.entrypoint[0]) if self.entrypoint else "package"


@attrs.frozen
class Command(ExecutableSpec):
    """Commands run on the cluster as they are; the job's args reach them as ``"$@"``."""

    commands: tuple[str, ...] = attrs.field(converter=_tuple)
    name_: str = attrs.field(default="command", alias="name")

    @property
    def name(self) -> str:
        return self.name_


@attrs.frozen
class SingularityContainer(ExecutableSpec):
    """Run ``entrypoint`` (a spec, or ``None`` to run the image's own runscript) in ``image_path``.

    ``image_path`` is a local image file (uploaded once, by content) or a URI singularity accepts
    (``docker://ubuntu:22.04``, ``library://...``, ``oras://...``) or a path on the cluster
    (``cluster:/shared/images/x.sif``). ``binds`` maps cluster paths to container paths.
    ``--nv`` is added when the executor requests GPUs.
    """

    entrypoint: ExecutableSpec | None
    image_path: str = attrs.field(converter=_path)
    binds: Mapping[str, str] = attrs.field(factory=dict, converter=_binds)
    options: tuple[str, ...] = attrs.field(default=(), converter=_tuple)

    @property
    def name(self) -> str:
        if self.entrypoint is not None:
            return self.entrypoint.name
        return os.path.basename(self.image_path).split(":")[0].rsplit(".", 1)[0] or "container"


# -- packaged --------------------------------------------------------------------------------


@attrs.frozen
class Artifact:
    """A content-addressed archive: staged once per cluster as ``artifacts/<sha256>``."""

    sha256: str
    local_path: str
    size: int
    kind: str = "archive"  # "archive" (tar.gz, unpacked on the cluster) or "file" (kept as is)


@attrs.frozen
class ContainerOptions:
    image: str  # a URI, a cluster path, or "artifact:<sha256>" for an uploaded image file
    binds: dict[str, str] = attrs.field(factory=dict)
    options: list[str] = attrs.field(factory=list)
    runtime: str = "singularity"  # or "docker" (lxm3's DockerContainer)


@attrs.define(kw_only=True)
class ClusterExecutable(Executable):
    """A packaged executable for a cluster.

    ``command`` is the argv prefix (job args follow it). ``package`` names the artifact whose
    unpacked directory becomes ``$XHPC_PACKAGE_DIR`` (and ``PYTHONPATH`` when ``pythonpath``);
    ``cwd_in_package`` runs the command from there, otherwise from the run directory.
    ``container`` wraps the command in ``singularity exec``. Nothing here becomes shell text:
    the job script reads it as data.
    """

    command: list[str]
    artifacts: list[Artifact] = attrs.field(factory=list)
    package: str | None = None  # sha256 of the main artifact
    pythonpath: bool = False
    cwd_in_package: bool = False
    container: ContainerOptions | None = None
