"""Packaging for ``Local``: binaries and Python modules need no build, only checks;
container specs become images on the local engine (built only when their content changed)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from xcore.plugin import (
    Binary,
    Container,
    Dockerfile,
    Packageable,
    PackagingContext,
    PackagingError,
    PythonContainer,
    PythonModule,
)
from xlocal.executables import LocalContainer, LocalProcess


def package_binary(packageable: Packageable, spec: Binary) -> LocalProcess:
    path = Path(spec.path).expanduser()
    if os.sep in spec.path or path.exists():
        resolved = path.resolve()
        if not resolved.is_file():
            raise PackagingError(
                f"Binary {spec.path!r} does not exist (looked at {resolved}). Check the path in xm.binary(...); "
                "relative paths are taken from the directory you launch from."
            )
        if not os.access(resolved, os.X_OK):
            raise PackagingError(f"Binary {resolved} is not executable: run `chmod +x {resolved}` "
                                 "or call it through an interpreter.")
        command = str(resolved)
    else:
        found = shutil.which(spec.path)
        if found is None:
            raise PackagingError(f"Binary {spec.path!r} is not a file and is not found on PATH "
                                 f"({os.environ.get('PATH', '')}).")
        command = found
    return LocalProcess(name=spec.name, command=[command])


def package_python_module(packageable: Packageable, spec: PythonModule) -> LocalProcess:
    project = Path(spec.path).expanduser().resolve()
    if not project.is_dir():
        raise PackagingError(f"python_module(path={spec.path!r}): {project} is not a directory.")
    top = spec.module.split(".")[0]
    if not ((project / top).is_dir() or (project / f"{top}.py").is_file()):
        raise PackagingError(
            f"python_module({spec.module!r}): neither {project / top}/ nor {project / (top + '.py')} exists. "
            "Set path= to the directory that contains the module."
        )
    python = spec.python or sys.executable
    user = packageable.env_vars.get("PYTHONPATH")  # the core attaches the other variables
    pythonpath = str(project) + (os.pathsep + str(user) if user else "")
    return LocalProcess(name=spec.name, command=[python, "-m", spec.module], env_vars={"PYTHONPATH": pythonpath})


# -- containers (the docker SDK is imported inside xlocal.images, only from here on) ---------


def package_python_container(packageable: Packageable, spec: PythonContainer,
                             context: PackagingContext) -> LocalContainer:
    from xlocal import images

    build_context = images.python_container_context(spec)
    return _build(packageable, spec.name, build_context, context)


def package_dockerfile(packageable: Packageable, spec: Dockerfile, context: PackagingContext) -> LocalContainer:
    from xlocal import images

    build_context = images.dockerfile_context(spec)
    return _build(packageable, spec.name, build_context, context)


def _build(packageable: Packageable, name: str, build_context: object, context: PackagingContext) -> LocalContainer:
    from xlocal import images

    client = images.connect()
    built = images.ensure_image(client, build_context, progress=context.progress,  # type: ignore[arg-type]
                                cache_dir=context.cache_dir / "xlocal-images")
    entrypoint = getattr(build_context, "entrypoint", None)
    return LocalContainer(
        name=name, image=built.tag, image_id=built.image_id,
        entrypoint=list(entrypoint) if entrypoint is not None else None,
    )


def package_container(packageable: Packageable, spec: Container, context: PackagingContext) -> LocalContainer:
    """An existing image: found on the engine, else pulled."""
    from xlocal import images
    from xlocal.images.engine import import_docker

    client = images.connect()
    docker = import_docker()
    try:
        image_id = client.api.inspect_image(spec.image_path)["Id"]
    except docker.errors.ImageNotFound:
        context.progress.update("pulling", detail=spec.image_path)
        try:
            client.images.pull(spec.image_path)
            image_id = client.api.inspect_image(spec.image_path)["Id"]
        except docker.errors.APIError as exc:
            raise PackagingError(
                f"Image {spec.image_path!r} is not on the engine at {images.engine_url()} and could not be pulled: "
                f"{exc.explanation or exc}. Check the name (`docker images`), or build or load the image first."
            ) from None
    return LocalContainer(name=spec.name, image=spec.image_path, image_id=image_id)
