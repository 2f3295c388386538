"""Packaging for clusters: deterministic, content-addressed archives, built once.

A build's inputs (source files, build arguments) are hashed first; an unchanged project
reuses the archive of its last build without running pip or the build script. Archives are
reproducible (sorted members, zero mtimes and owners), named by their own sha256, and only
hold regular files and directories, so unpacking them cannot write outside their directory.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from xcore.plugin import (
    Binary,
    Container,
    DigestCache,
    ExecutableSpec,
    ModuleName,
    Packageable,
    PackagingContext,
    PackagingError,
    PythonModule,
    atomic_write,
    is_ignored,
    private_dir,
)
from xhpc.executables import (
    Artifact,
    ClusterExecutable,
    Command,
    ContainerOptions,
    Fileset,
    PythonPackage,
    SingularityContainer,
    UniversalPackage,
)

URI_SCHEMES = ("docker://", "docker-daemon://", "library://", "oras://", "shub://", "http://", "https://")
CLUSTER_PREFIX = "cluster:"


def package(packageable: Packageable, context: PackagingContext) -> ClusterExecutable | None:
    """The packaged executable (the core attaches the packageable's args and env vars)."""
    digests = _use_digests(context.cache_dir / "xhpc" / "digests.json")
    try:
        return _package_spec(packageable.executable_spec, Cache(context.cache_dir / "xhpc"), context)
    finally:
        try:
            digests.save()
        except OSError:
            pass  # a cache: the next launch hashes again


def _package_spec(spec: ExecutableSpec, cache: Cache, context: PackagingContext) -> ClusterExecutable | None:
    if isinstance(spec, PythonPackage):
        return _python_package(spec, cache, context)
    if isinstance(spec, UniversalPackage):
        return _universal_package(spec, cache, context)
    if isinstance(spec, PythonModule):
        return _python_module(spec, cache)
    if isinstance(spec, Binary):
        return _binary(spec, cache)
    if isinstance(spec, Command):
        return ClusterExecutable(name=spec.name, command=["/bin/bash", "-c", "\n".join(spec.commands), spec.name])
    if isinstance(spec, Fileset):
        artifact = cache.archive_of_files(_fileset_entries([spec]))
        return ClusterExecutable(name="fileset", command=["true"], artifacts=[artifact], package=artifact.sha256,
                                 cwd_in_package=True)
    if isinstance(spec, SingularityContainer):
        return _singularity(spec, cache, context)
    if isinstance(spec, Container):
        return _singularity(SingularityContainer(None, spec.image_path), cache, context)
    from xhpc import lxm3_packaging  # lxm3's PexBinary, PDMProject, DockerContainer

    return lxm3_packaging.package_spec(spec, cache, context, _package_spec)


# -- content-addressed cache -----------------------------------------------------------------


class Cache:
    """``artifacts/<sha>.tar.gz`` plus ``builds/<input hash>.json`` pointing at them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.artifacts = root / "artifacts"
        self.builds = root / "builds"

    def lookup(self, key: str) -> Artifact | None:
        try:
            data = json.loads((self.builds / f"{key}.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        path = Path(data["local_path"])
        if not path.is_file() or path.stat().st_size != data["size"]:
            return None
        return Artifact(data["sha256"], str(path), data["size"], data.get("kind", "archive"))

    def remember(self, key: str, artifact: Artifact) -> Artifact:
        atomic_write(self.builds / f"{key}.json", json.dumps({  # 0600: builds may hold anything
            "sha256": artifact.sha256, "local_path": artifact.local_path, "size": artifact.size,
            "kind": artifact.kind}))
        return artifact

    def store_bytes(self, data: bytes, suffix: str = ".tar.gz", kind: str = "archive") -> Artifact:
        sha = hashlib.sha256(data).hexdigest()
        path = self.artifacts / f"{sha}{suffix}"
        if not path.exists():
            atomic_write(path, data)
        return Artifact(sha, str(path), len(data), kind)

    def archive_of_files(self, entries: Iterable[tuple[str, Path]]) -> Artifact:
        """Archive ``(path in archive, local file)`` pairs, cached by their content."""
        entries = sorted(entries)
        key = hashlib.sha256(b"files\0")
        for arcname, local in entries:
            key.update(arcname.encode() + b"\0" + _file_digest(local).encode() + b"\0")
        found = self.lookup(key.hexdigest())
        if found:
            return found
        return self.remember(key.hexdigest(), self.store_bytes(build_archive(entries)))

    def file_artifact(self, path: Path) -> Artifact:
        sha = _file_digest(path)
        private_dir(self.artifacts)
        target = self.artifacts / f"{sha}{path.suffix}"
        if not target.exists():
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            shutil.copyfile(path, tmp)
            os.chmod(tmp, 0o600)
            os.replace(tmp, target)
        return Artifact(sha, str(target), target.stat().st_size, "file")


# A file is hashed again only when its size, mtime, ctime or inode changed. ``package`` loads
# the cache kept in the xcore cache directory, so a relaunch from a new process stats the
# project instead of reading it (a write changes the ctime even when size and mtime are
# restored). Without a cache directory (direct calls), the cache lives for the process.
_DIGESTS = DigestCache()
_DIGESTS_MAX_BYTES = 32 * 2**20  # ~200,000 files; a bigger saved cache starts over (files long gone)


def _use_digests(path: Path) -> DigestCache:
    global _DIGESTS
    if _DIGESTS.path != path:
        try:
            too_big = path.stat().st_size > _DIGESTS_MAX_BYTES
        except OSError:
            too_big = False
        if too_big:
            path.unlink(missing_ok=True)
        _DIGESTS = DigestCache(path)
    return _DIGESTS


def _file_digest(path: Path) -> str:
    return _DIGESTS.digest(path)


def build_archive(entries: Iterable[tuple[str, Path]]) -> bytes:
    """A reproducible tar.gz of regular files (symlinks are followed; nothing else is stored)."""
    import gzip
    import tarfile  # only when building: an unchanged relaunch never needs it

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for arcname, local in sorted(entries):
            arcname = safe_member_name(arcname)
            parts = arcname.split("/")
            for depth in range(1, len(parts)):
                parent = "/".join(parts[:depth])
                if parent not in dirs:
                    dirs.add(parent)
                    info = tarfile.TarInfo(parent)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    tar.addfile(info)
            st = local.stat()
            info = tarfile.TarInfo(arcname)
            info.size = st.st_size
            info.mode = 0o755 if st.st_mode & stat.S_IXUSR else 0o644
            info.mtime = 0
            with open(local, "rb") as handle:
                tar.addfile(info, handle)
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=0)


def safe_member_name(name: str) -> str:
    clean = name.replace(os.sep, "/")
    parts = [p for p in clean.split("/") if p not in ("", ".")]
    if clean.startswith("/") or ".." in parts or not parts:
        raise PackagingError(f"Path {name!r} would be unpacked outside the package directory; "
                             "use a relative path inside it.")
    return "/".join(parts)


def walk_files(root: Path, escapes: list[str] | None = None) -> Iterator[tuple[str, Path]]:
    """Regular files under ``root``, skipping the core's one ignore list (``is_ignored``).

    Symlinks (to files or directories) are followed while they stay inside ``root``; a link that
    leaves it (``-> /etc/shadow``) would ship a file from elsewhere on this machine, so it is
    skipped and its path appended to ``escapes`` (warned about when ``escapes`` is None).
    """
    root_resolved = root.resolve()
    found: list[str] = [] if escapes is None else escapes

    def visit(directory: Path, prefix: str, ancestors: frozenset[Path]) -> Iterator[tuple[str, Path]]:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            path = Path(entry.path)
            rel = f"{prefix}{entry.name}"
            if entry.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(root_resolved):
                    found.append(rel)
                    continue
            if is_ignored(rel):
                continue
            if entry.is_dir():
                real = path.resolve()
                if real in ancestors:  # a link back up the tree
                    continue
                yield from visit(path, f"{rel}/", ancestors | {real})
            elif entry.is_file():
                yield rel, path

    yield from visit(root, "", frozenset({root_resolved}))
    if escapes is None and found:
        _warn_escapes(root, found)


def _warn_escapes(root: Path, links: list[str]) -> None:
    import warnings

    shown = ", ".join(links[:5]) + (f" and {len(links) - 5} more" if len(links) > 5 else "")
    warnings.warn(f"{root}: skipped symlinks that point outside the directory (not shipped): {shown}.",
                  UserWarning, stacklevel=3)


def refuse_escaping_links(root: Path, what: str) -> None:
    """A clear error when a link under ``root`` points outside it (pip would copy its target)."""
    escapes: list[str] = []
    for _ in walk_files(root, escapes):
        pass
    _refuse(root, escapes, what)


def _refuse(root: Path, escapes: list[str], what: str) -> None:
    if escapes:
        shown = ", ".join(f"{e} -> {os.readlink(root / e)}" for e in escapes[:5])
        raise PackagingError(
            f"{what}: symlinks point outside {root} and would ship files from elsewhere on this machine: {shown}"
            f"{f' and {len(escapes) - 5} more' if len(escapes) > 5 else ''}. Remove them, or copy what the job "
            "needs into the project."
        )


def tree_key(label: str, root: Path, extra: Any = None, refuse_links: str | None = None) -> str:
    """A hash of every file under ``root`` (names and contents) plus ``extra``. With
    ``refuse_links`` (what is being packaged), a link out of ``root`` is an error, found by the
    same walk of the tree."""
    digest = hashlib.sha256(f"{label}\0{json.dumps(extra, sort_keys=True, default=str)}\0".encode())
    escapes: list[str] | None = [] if refuse_links is not None else None
    for arcname, path in walk_files(root, escapes):
        digest.update(arcname.encode() + b"\0" + _file_digest(path).encode() + b"\0")
    if refuse_links is not None and escapes:
        _refuse(root, escapes, refuse_links)
    return digest.hexdigest()


def _fileset_entries(filesets: Iterable[Fileset]) -> list[tuple[str, Path]]:
    entries: dict[str, Path] = {}
    for fileset in filesets:
        for src, dst in fileset.files.items():
            path = Path(src).expanduser()
            if not path.exists():
                raise PackagingError(f"Fileset: {src!r} does not exist (looked at {path.resolve()}).")
            if path.is_dir():
                for rel, file in walk_files(path):
                    entries[f"{dst.rstrip('/')}/{rel}"] = file
            else:
                entries[dst] = path
    return [(safe_member_name(k), v) for k, v in entries.items()]


# -- specs -------------------------------------------------------------------------------------


def _project_dir(path: str, what: str) -> Path:
    project = Path(path).expanduser().resolve()
    if not project.is_dir():
        raise PackagingError(f"{what}(path={path!r}): {project} is not a directory.")
    return project


def _python_package(spec: PythonPackage, cache: Cache, context: PackagingContext) -> ClusterExecutable:
    project = _project_dir(spec.path, "PythonPackage")
    if not any((project / f).is_file() for f in ("pyproject.toml", "setup.py", "setup.cfg")):
        raise PackagingError(
            f"PythonPackage(path={spec.path!r}): {project} has no pyproject.toml, setup.py or setup.cfg, so pip "
            "cannot install it. Add a pyproject.toml, or use xm.python_module(...) to ship the directory as is."
        )
    resources = _fileset_entries(spec.resources)
    extra = {"pip_args": spec.pip_args, "extra": spec.extra_packages,
             "resources": [(a, _file_digest(p)) for a, p in resources]}
    key = tree_key("python-package", project, extra, refuse_links=f"PythonPackage(path={spec.path!r})")
    artifact = cache.lookup(key)
    if artifact is None:
        context.progress.update("building", detail=f"pip install --no-deps {project}")
        with tempfile.TemporaryDirectory(prefix="xhpc-build-") as tmp:
            target = Path(tmp) / "out"
            argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--target", str(target), *spec.pip_args, str(project), *spec.extra_packages]
            result = subprocess.run(argv, capture_output=True, text=True)
            if result.returncode != 0:
                raise PackagingError(f"Building {project} failed (`{' '.join(argv[2:])}`):\n"
                                     f"{result.stderr.strip()[-2000:]}")
            shutil.rmtree(target / "bin", ignore_errors=True)
            for info in target.glob("*.dist-info"):
                shutil.rmtree(info, ignore_errors=True)
            files = dict(walk_files(target))
            for arcname, path in resources:
                files[arcname] = path
            artifact = cache.remember(key, cache.store_bytes(build_archive(files.items())))
    if isinstance(spec.entrypoint, ModuleName):
        command = [spec.python, "-m", spec.entrypoint.module_name]
    else:
        command = ["/bin/bash", "-c", "\n".join(spec.entrypoint.commands), spec.name]
    return ClusterExecutable(name=spec.name, command=command, artifacts=[artifact], package=artifact.sha256,
                             pythonpath=True)


def _universal_package(spec: UniversalPackage, cache: Cache, context: PackagingContext) -> ClusterExecutable:
    project = _project_dir(spec.path, "UniversalPackage")
    script = (project / spec.build_script) if not os.path.isabs(spec.build_script) else Path(spec.build_script)
    if not script.is_file():
        raise PackagingError(f"UniversalPackage: build script {script} does not exist.")
    if not os.access(script, os.X_OK):
        raise PackagingError(f"UniversalPackage: build script {script} is not executable: run `chmod +x {script}`.")
    key = tree_key("universal-package", project, {"script": spec.build_script, "args": spec.build_args})
    artifact = cache.lookup(key)
    if artifact is None:
        context.progress.update("building", detail=str(script))
        with tempfile.TemporaryDirectory(prefix="xhpc-build-") as tmp:
            result = subprocess.run([str(script), *spec.build_args], cwd=project, capture_output=True, text=True,
                                    env={**os.environ, "BUILDDIR": tmp})
            if result.returncode != 0:
                raise PackagingError(f"Build script {script} failed (exit {result.returncode}):\n"
                                     f"{result.stderr.strip()[-2000:]}")
            artifact = cache.remember(key, cache.store_bytes(build_archive(walk_files(Path(tmp)))))
    if not spec.entrypoint:
        raise PackagingError("UniversalPackage(entrypoint=...) needs the argv to run, e.g. ['./run.sh'].")
    return ClusterExecutable(name=spec.name, command=list(spec.entrypoint), artifacts=[artifact],
                             package=artifact.sha256, cwd_in_package=True)


def _python_module(spec: PythonModule, cache: Cache) -> ClusterExecutable:
    project = _project_dir(spec.path, "python_module")
    top = spec.module.split(".")[0]
    if not ((project / top).is_dir() or (project / f"{top}.py").is_file()):
        raise PackagingError(
            f"python_module({spec.module!r}): neither {project / top}/ nor {project / (top + '.py')} exists. "
            "Set path= to the directory that contains the module."
        )
    artifact = cache.archive_of_files(walk_files(project))
    return ClusterExecutable(name=spec.name, command=[spec.python or "python3", "-m", spec.module],
                             artifacts=[artifact], package=artifact.sha256, pythonpath=True)


def _binary(spec: Binary, cache: Cache) -> ClusterExecutable:
    path = Path(spec.path).expanduser()
    if not path.is_file():
        if os.sep in spec.path and not spec.path.startswith(CLUSTER_PREFIX):
            raise PackagingError(
                f"Binary {spec.path!r} is not a local file. For a program that exists only on the cluster, "
                f"write its name (\"python3\") or {CLUSTER_PREFIX}/abs/path."
            )
        name = spec.path.removeprefix(CLUSTER_PREFIX)
        return ClusterExecutable(name=spec.name, command=[name])
    files = [(path.name, path)] + [(Path(d.path).name, Path(d.path).expanduser()) for d in spec.dependencies]
    for _, file in files:
        if not file.is_file():
            raise PackagingError(f"Binary dependency {file} does not exist.")
    artifact = cache.archive_of_files(files)
    return ClusterExecutable(name=spec.name, command=[f"./{path.name}"], artifacts=[artifact],
                             package=artifact.sha256, cwd_in_package=True)


def _singularity(spec: SingularityContainer, cache: Cache, context: PackagingContext) -> ClusterExecutable:
    image = spec.image_path
    artifacts: list[Artifact] = []
    if image.startswith(URI_SCHEMES):
        ref = image
    elif image.startswith(CLUSTER_PREFIX):
        ref = image.removeprefix(CLUSTER_PREFIX)
    else:
        local = Path(image).expanduser()
        if not local.is_file():
            raise PackagingError(
                f"SingularityContainer: image {image!r} is not a local file. Give a .sif file, a URI "
                f"(docker://..., library://...), or {CLUSTER_PREFIX}/path/on/cluster.sif."
            )
        artifact = cache.file_artifact(local)
        artifacts.append(artifact)
        ref = f"artifact:{artifact.sha256}"
    inner = _package_spec(spec.entrypoint, cache, context) if spec.entrypoint is not None else None
    if spec.entrypoint is not None and inner is None:
        raise PackagingError(f"SingularityContainer cannot run a {type(spec.entrypoint).__name__} entrypoint.")
    options = ContainerOptions(image=ref, binds=dict(spec.binds), options=list(spec.options))
    if inner is None:
        return ClusterExecutable(name=spec.name, command=[], artifacts=artifacts, container=options)
    inner.artifacts = [*inner.artifacts, *artifacts]
    inner.container = options
    return inner
