"""Packaging for ``Local``: binaries and Python modules need no build, only checks;
container specs become images on the local engine (built only when their content changed)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from xcore.plugin import (
    BazelBinary,
    BazelContainer,
    Binary,
    Container,
    Dockerfile,
    Executable,
    ModuleName,
    Packageable,
    PackagingContext,
    PackagingError,
    PythonContainer,
    PythonModule,
    bazel_build,
    bazel_output,
    bazel_workspace,
)
from xlocal.executables import LocalContainer, LocalProcess


def package_binary(packageable: Packageable, spec: Binary) -> LocalProcess:
    path = Path(spec.path).expanduser()
    if os.sep in spec.path or path.exists():
        # Absolute, its symlinks kept: a virtual environment's python is a symlink, and its target
        # run directly has none of the environment's packages.
        resolved = Path(os.path.abspath(path))
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
        import shutil  # only for a bare command name: shutil costs a launch a few ms

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


# -- containers (the docker SDK is imported inside xcore.images, only from here on) ---------


def package_python_container(packageable: Packageable, spec: PythonContainer,
                             context: PackagingContext) -> LocalContainer:
    from xcore import images

    build_context = images.python_container_context(spec)
    return _build(packageable, spec.name, build_context, context)


def package_dockerfile(packageable: Packageable, spec: Dockerfile, context: PackagingContext) -> LocalContainer:
    from xcore import images

    build_context = images.dockerfile_context(spec)
    return _build(packageable, spec.name, build_context, context)


def _build(packageable: Packageable, name: str, build_context: object, context: PackagingContext) -> LocalContainer:
    from xcore import images

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
    from xcore import images
    from xcore.images import import_docker

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


# -- Bazel targets ---------------------------------------------------------------------------


def package_bazel_binary(packageable: Packageable, spec: BazelBinary, context: PackagingContext) -> LocalProcess:
    """``bazel build`` the target; the job runs the file it built, from the workspace root."""
    workspace = bazel_workspace()
    built = bazel_build([spec.label], spec.bazel_args, workspace, context.progress)
    path = bazel_output(spec.label, built[spec.label], "binary")
    if not os.access(path, os.X_OK):
        raise PackagingError(f"Bazel target {spec.label} built {path}, which is not executable.")
    return LocalProcess(name=spec.name, command=[path])


def package_bazel_container(packageable: Packageable, spec: BazelContainer,
                            context: PackagingContext) -> LocalContainer:
    """``bazel build`` the image tarball and ``docker load`` it into the local engine."""
    from xcore import images

    built = bazel_build([spec.label], spec.bazel_args, None, context.progress)
    tarball = bazel_output(spec.label, built[spec.label], "container")
    client = images.connect()
    context.progress.update("loading image", detail=os.path.basename(tarball))
    with open(tarball, "rb") as data:
        loaded = client.images.load(data)
    if not loaded:
        raise PackagingError(f"{tarball} (from {spec.label}) holds no image the engine could load.")
    image = loaded[0]
    tag = image.tags[0] if image.tags else image.id
    return LocalContainer(name=spec.name, image=tag, image_id=image.id)


# -- lxm3's PythonPackage (xhpc.PythonPackage) on this machine ----------------------------------


def package_python_package(packageable: Packageable, spec: object, context: PackagingContext) -> LocalProcess:
    """``pip install --no-deps`` the project into a cached directory put first on PYTHONPATH,
    then run the entrypoint, as lxm3's ``Local`` does; rebuilt when a file of the project changes."""
    import hashlib
    import subprocess
    import tempfile

    project = Path(spec.path).expanduser().resolve()  # type: ignore[attr-defined]
    if not any((project / f).is_file() for f in ("pyproject.toml", "setup.py", "setup.cfg")):
        raise PackagingError(
            f"PythonPackage(path={spec.path!r}): {project} has no pyproject.toml, setup.py or setup.cfg, so pip "  # type: ignore[attr-defined]
            "cannot install it. Add a pyproject.toml, or use xm.python_module(...) to run the directory as is."
        )
    pip_args = list(spec.pip_args)  # type: ignore[attr-defined]
    extra = list(spec.extra_packages)  # type: ignore[attr-defined]
    digest = hashlib.sha256(repr((str(project), pip_args, extra)).encode())
    for path in sorted(project.rglob("*")):
        parts = path.relative_to(project).parts
        if path.is_file() and not any(p in (".git", "__pycache__", "build", ".venv") or p.endswith(".egg-info")
                                      for p in parts):
            stat = path.stat()
            digest.update(f"{path.relative_to(project)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    target = context.cache_dir / "xlocal-python-packages" / digest.hexdigest()[:32]
    if not target.is_dir():
        context.progress.update("building", detail=f"pip install --no-deps {project}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="build-", dir=target.parent) as tmp:
            out = Path(tmp) / "out"
            argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--target", str(out), *pip_args, str(project), *extra]
            done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
            if done.returncode != 0:
                raise PackagingError(
                    f"Building {project} failed (`{' '.join(argv[2:])}`):\n{done.stderr.strip()[-2000:]}")
            try:
                out.rename(target)
            except OSError:  # built meanwhile by another launcher
                if not target.is_dir():
                    raise
    env = dict(packageable.env_vars)
    env["PYTHONPATH"] = str(target) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    entrypoint = spec.entrypoint  # type: ignore[attr-defined]
    if isinstance(entrypoint, ModuleName):
        command = [sys.executable, "-m", entrypoint.module_name]
    else:
        command = ["/bin/sh", "-c", "\n".join(entrypoint.commands), spec.name]  # type: ignore[attr-defined]
    return LocalProcess(name=spec.name, command=command, env_vars=env)  # type: ignore[attr-defined]


# -- lxm3's other specs (xhpc.xm_cluster) on this machine ---------------------------------------


def package_lxm3(packageable: Packageable, spec: object, context: PackagingContext) -> Executable | None:
    """lxm3's specs given to ``xm_cluster.Local``, as lxm3's local executor runs them. xhpc builds
    the package as it does for a cluster (``UniversalPackage``'s build script, ``PexBinary``'s
    ``pex``, ``PDMProject``'s locked dependencies); here it is unpacked into the cache and run
    with the launcher's Python. None for a spec that is not xhpc's."""
    module, kind = type(spec).__module__, type(spec).__name__
    if not module.startswith("xhpc."):
        return None
    if kind == "PythonPackage" and hasattr(spec, "pip_args"):
        return package_python_package(packageable, spec, context)
    if kind == "PythonContainer" and hasattr(spec, "requirements"):  # lxm3's: an image built on base_image
        return _lxm3_python_container(packageable, spec, context)
    if kind == "DockerContainer":
        raise PackagingError(
            "xm_cluster.DockerContainer is packaged for Slurm and Grid Engine executors (docker run on the node). "
            "On xm_cluster.Local run the same image with xm.python_container(...) or xm.container(...) and "
            "xlocal.Local(docker_options=...), or run the entrypoint spec itself.")
    if kind not in ("UniversalPackage", "PexBinary", "PDMProject", "SingularityContainer"):
        return None
    runtime = None
    if kind == "SingularityContainer" or (kind == "PDMProject" and getattr(spec, "base_image", None)):
        runtime = _singularity_binary()
        if runtime is None and kind == "SingularityContainer":
            raise PackagingError(
                f"xm_cluster.SingularityContainer({spec.image_path!r}) on xm_cluster.Local needs Apptainer or "  # type: ignore[attr-defined]
                "Singularity on this machine, and neither `apptainer` nor `singularity` is on PATH. Install "
                "Apptainer, run the spec inside it without the container, or use a cluster executor.")
    from xhpc import packaging as cluster_packaging

    cluster = cluster_packaging.package(packageable, context)
    if cluster is None:
        return None
    if runtime is None and cluster.container is not None:  # PDMProject: base_image needs a container runtime
        context.progress.message(
            f"warning: {kind}(base_image={spec.base_image!r}) runs with this machine's Python on "  # type: ignore[attr-defined]
            "xm_cluster.Local: neither `apptainer` nor `singularity` is on PATH to run the image.")
        cluster.container = None
    return _local_process(packageable, cluster, runtime, context)


def _singularity_binary() -> str | None:
    import shutil

    return shutil.which("apptainer") or shutil.which("singularity")


def _unpacked(artifact: object, context: PackagingContext) -> Path:
    """An xhpc package archive unpacked once per content into the cache."""
    import shutil
    import tempfile

    target = context.cache_dir / "xlocal-lxm3" / artifact.sha256  # type: ignore[attr-defined]
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="unpack-", dir=target.parent) as tmp:
            out = Path(tmp) / "out"
            shutil.unpack_archive(artifact.local_path, out, format="gztar")  # type: ignore[attr-defined]
            try:
                out.rename(target)
            except OSError:  # unpacked meanwhile by another launcher
                if not target.is_dir():
                    raise
    return target


def _local_process(packageable: Packageable, cluster: Any, runtime: str | None,
                   context: PackagingContext) -> LocalProcess:
    env = dict(packageable.env_vars)
    package_dir: Path | None = None
    files: dict[str, Path] = {}
    for artifact in cluster.artifacts:
        if artifact.sha256 == cluster.package:
            package_dir = _unpacked(artifact, context)
        else:
            files[artifact.sha256] = Path(artifact.local_path)
    if package_dir is not None:
        env["XHPC_PACKAGE_DIR"] = str(package_dir)
        if cluster.pythonpath:
            env["PYTHONPATH"] = str(package_dir) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    command = list(cluster.command)
    if runtime is None and command:
        if command[0] in ("python3", "python"):  # the package was built for the launcher's Python
            command[0] = sys.executable
        elif command[0].endswith(".pex"):  # lxm3's Local runs a PEX on the launcher's environment
            command.insert(0, sys.executable)
    if cluster.container is not None and runtime is not None:
        image = cluster.container.image
        if image.startswith("artifact:"):
            image = str(files[image.removeprefix("artifact:")])
        elif image.startswith("cluster:"):
            image = image.removeprefix("cluster:")
        binds = [arg for src, dst in cluster.container.binds.items() for arg in ("--bind", f"{src}:{dst}")]
        if package_dir is not None:
            binds += ["--bind", str(package_dir)]
        command = [runtime, "exec", *binds, *cluster.container.options, image, *command]
    cwd = str(package_dir) if cluster.cwd_in_package and package_dir is not None else None
    return LocalProcess(name=cluster.name, command=command, env_vars=env, cwd=cwd)


def _lxm3_python_container(packageable: Packageable, spec: Any, context: PackagingContext) -> LocalContainer:
    """lxm3's ``PythonContainer(entrypoint, base_image, requirements, path)``: the same image as
    ``xm.python_container`` builds (it installs the project's ``requirements.txt``)."""
    project = Path(spec.path).expanduser().resolve()
    if spec.requirements != "requirements.txt" and (project / spec.requirements).is_file():
        raise PackagingError(
            f"xm_cluster.PythonContainer(requirements={spec.requirements!r}): xlocal installs the project's "
            "requirements.txt; rename the file, or use xm.python_container(..., docker_instructions=[...]).")
    return package_python_container(packageable, PythonContainer(spec.entrypoint, str(project), spec.base_image),
                                    context)
