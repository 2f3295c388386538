"""Packaging for lxm3's ``PexBinary``, ``PDMProject`` and ``DockerContainer`` specs.

As lxm3 builds them:

- ``PexBinary``: ``pex --package/--module ... --inherit-path=fallback --entry-point MODULE
  --runtime-pex-root=./.pex`` run in ``path``; the ``.pex`` and the ``dependencies`` filesets
  form one archive, and the job runs ``./NAME.pex ARGS`` from the unpacked archive (so files of
  a ``Fileset`` are found by their relative path). No dependencies are bundled in the PEX: they
  come from the job's environment, as in lxm3.
- ``PDMProject``: the project's locked dependencies (``pdm export`` of ``lock_file``) plus the
  project itself (``pip install --no-deps``) in one archive on ``PYTHONPATH``, run in the
  ``base_image`` with the cluster's Singularity/Apptainer. lxm3 installs the dependencies into a
  Docker image built on ``base_image`` and converts it to a SIF file; xhpc puts them in the
  archive so no image build or conversion is needed (``base_image=None``: the cluster's Python).
- ``DockerContainer``: another spec run inside a Docker ``image`` with ``docker run`` on the
  node (lxm3's Docker runtime); see ``scripts.docker_command``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xcore.plugin import ModuleName, PackagingContext, PackagingError
from xhpc.executables import ClusterExecutable, ContainerOptions, PythonPackage

if TYPE_CHECKING:
    from xhpc.packaging import Cache


def package_spec(spec: Any, cache: Cache, context: PackagingContext, package_inner: Any) -> ClusterExecutable | None:
    from xhpc import xm_cluster

    if isinstance(spec, xm_cluster.PexBinary):
        return _pex_binary(spec, cache, context)
    if isinstance(spec, xm_cluster.PDMProject):
        return _pdm_project(spec, cache, context)
    if isinstance(spec, xm_cluster.DockerContainer):
        inner = package_inner(spec.entrypoint, cache, context)
        if inner is None:
            raise PackagingError(f"DockerContainer cannot run a {type(spec.entrypoint).__name__} entrypoint; give "
                                 "a PythonPackage, UniversalPackage or PexBinary.")
        if inner.container is not None:
            raise PackagingError("DockerContainer: the entrypoint is already a container; give the spec inside it.")
        options = spec.options
        inner.container = ContainerOptions(image=spec.image, binds=dict(options.volumes),
                                           options=list(options.extra_options), runtime="docker")
        return inner
    return None


def _tool(name: str, module: str) -> list[str]:
    """``name`` from PATH, else ``python -m module`` when it is installed next to xcore."""
    found = shutil.which(name)
    if found:
        return [found]
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        return [sys.executable, "-m", module]
    raise PackagingError(f"{name} is not installed: pip install {name} (lxm3 needs it for this spec too).")


def _run(argv: list[str], what: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise PackagingError(f"{what} failed (`{' '.join(argv)}`, exit {result.returncode}):\n"
                             f"{(result.stderr or result.stdout).strip()[-2000:]}")


def _pex_binary(spec: Any, cache: Cache, context: PackagingContext) -> ClusterExecutable:
    from xhpc.packaging import _file_digest, _fileset_entries, _project_dir, build_archive, tree_key

    project = _project_dir(spec.path, "PexBinary")
    if not isinstance(spec.entrypoint, ModuleName):
        raise PackagingError("PexBinary(entrypoint=...) takes xm.ModuleName('package.module'), as in lxm3.")
    module = spec.entrypoint.module_name
    pex_name = f"{spec.name}.pex"
    options = [arg for package in spec.packages for arg in ("--package", package)]
    options += [arg for name in spec.modules for arg in ("--module", name)]
    options += ["--inherit-path=fallback", "--entry-point", module, "--runtime-pex-root=./.pex",
                "--python-shebang=/usr/bin/env python3"]
    resources = _fileset_entries(spec.dependencies)
    key = tree_key("pex-binary", project, {"options": options, "name": pex_name,
                                           "resources": [(a, _file_digest(p)) for a, p in resources]})
    artifact = cache.lookup(key)
    if artifact is None:
        pex = _tool("pex", "pex")
        context.progress.update("building", detail=f"pex {pex_name}")
        with tempfile.TemporaryDirectory(prefix="xhpc-pex-") as tmp:
            output = Path(tmp) / pex_name
            _run([*pex, "-o", str(output), *options], f"Building {pex_name} with pex", project)
            files = dict(resources)
            files[pex_name] = output
            artifact = cache.remember(key, cache.store_bytes(build_archive(files.items())))
    return ClusterExecutable(name=spec.name, command=[f"./{pex_name}"], artifacts=[artifact],
                             package=artifact.sha256, cwd_in_package=True)


def _pdm_project(spec: Any, cache: Cache, context: PackagingContext) -> ClusterExecutable:
    from xhpc.packaging import (
        _file_digest,
        _fileset_entries,
        _project_dir,
        _python_package,
        _singularity,
        build_archive,
        tree_key,
        walk_files,
    )
    from xhpc.xm_cluster import SingularityContainer

    project = _project_dir(spec.path, "PDMProject")
    lock = project / spec.lock_file
    if not lock.is_file():
        raise PackagingError(f"PDMProject: lock file {lock} does not exist; run `pdm lock` in {project}.")
    package = PythonPackage(spec.entrypoint, path=str(project), resources=spec.resources,
                            extra_packages=spec.extra_packages, pip_args=spec.pip_args)
    key = tree_key("pdm-project", project, {"lock": spec.lock_file, "pip_args": spec.pip_args,
                                            "extra": spec.extra_packages,
                                            "resources": [(a, _file_digest(p))
                                                          for a, p in _fileset_entries(spec.resources)]})
    artifact = cache.lookup(key)
    if artifact is None:
        pdm = _tool("pdm", "pdm")
        context.progress.update("building", detail=f"pdm export + pip install {project}")
        with tempfile.TemporaryDirectory(prefix="xhpc-pdm-") as tmp:
            requirements = Path(tmp) / "requirements.txt"
            # No virtualenv is made for the export: pdm only reads the lock file.
            env = {**os.environ, "PDM_CHECK_UPDATE": "false", "PDM_USE_VENV": "false", "PDM_PYTHON": sys.executable}
            export = [*pdm, "export", "--lockfile", str(lock), "--format", "requirements", "--prod",
                      "--output", str(requirements)]
            try:
                _run(export, f"Exporting {lock.name} with pdm", project, env)
            except PackagingError as error:
                if "inherit_metadata" in str(error):  # a lock file of an older PDM (lxm3's examples' own)
                    requirements.write_text(_requirements_of_old_lock(lock, project))
                elif "--no-hashes" in str(error):  # path or URL dependencies have no hashes to check
                    _run([*export, "--no-hashes"], f"Exporting {lock.name} with pdm", project, env)
                else:
                    raise
            deps = Path(tmp) / "deps"
            pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                   "--no-compile"]
            locked = [line for line in requirements.read_text().splitlines()
                      if line.strip() and not line.lstrip().startswith("#")]
            if locked:  # pip refuses an empty requirements file
                _run([*pip, "--target", str(deps), "-r", str(requirements)], "Installing the locked dependencies",
                     project)
            files = dict(walk_files(deps)) if deps.is_dir() else {}
            own = _python_package(package, cache, context)
            own_dir = Path(tmp) / "own"
            shutil.unpack_archive(own.artifacts[0].local_path, own_dir, format="gztar")
            files = {k: v for k, v in files.items() if not k.startswith(("bin/",)) and ".dist-info/" not in k}
            files.update(walk_files(own_dir))
            artifact = cache.remember(key, cache.store_bytes(build_archive(files.items())))
    if isinstance(spec.entrypoint, ModuleName):
        command = ["python3", "-m", spec.entrypoint.module_name]
    else:
        command = ["/bin/bash", "-c", "\n".join(spec.entrypoint.commands), spec.name]
    executable = ClusterExecutable(name=spec.name, command=command, artifacts=[artifact], package=artifact.sha256,
                                   pythonpath=True)
    if spec.base_image:
        given = spec.base_image
        image = given if ("://" in given or given.startswith("cluster:") or given.endswith(".sif")) \
            else f"docker://{given}"
        container = _singularity(SingularityContainer(None, image), cache, context)
        executable.container = container.container
        executable.artifacts = [*executable.artifacts, *container.artifacts]  # a local .sif is uploaded too
    return executable


def _requirements_of_old_lock(lock: Path, project: Path) -> str:
    """The default group's pinned packages of a lock file written without environment markers
    (PDM before ``inherit_metadata``: lock_version 4.4 and earlier), which ``pdm export``
    refuses. Every locked package of the group is installed (such a lock does not say which
    apply to this platform), pinned to its version and, where the lock has them, its hashes."""
    import tomllib

    redo = (f"run `pdm lock --strategy inherit_metadata` in {project} to rewrite {lock.name} in the current "
            "format, then launch again")
    try:
        data = tomllib.loads(lock.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PackagingError(f"PDMProject: {lock} cannot be read ({exc}); {redo}.") from None
    lines = []
    for package in data.get("package", []):
        if "default" not in package.get("groups", ["default"]):
            continue
        if any(key in package for key in ("path", "url", "git", "editable")) or "version" not in package:
            raise PackagingError(
                f"PDMProject: {lock} is in an older PDM format and pins {package.get('name', '?')} to a path, URL or "
                f"repository, which xhpc cannot read from it; {redo}.")
        hashes = [f" --hash={entry['hash']}" for entry in package.get("files", []) if "hash" in entry]
        lines.append(f"{package['name']}=={package['version']}{''.join(hashes)}")
    return "\n".join(lines) + ("\n" if lines else "")
