"""Build contexts: which files go into an image, the Dockerfile, and the content hash.

Nothing here talks to an engine: a context and its hash are computed from files alone
(plus the ids of the base images, which the caller resolves).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import sys
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

import attrs

from xcore.images.ignore import IgnoreRules
from xcore.plugin import (
    DEFAULT_IGNORE_PATTERNS,
    DigestCache,
    Dockerfile,
    ModuleName,
    PackagingError,
    PythonContainer,
    entrypoint_argv,
)

HASH_VERSION = "xcore-image-v1"
DOCKERFILE_ARCNAME = ".xcore/Dockerfile"
WORKDIR = "/app"

# Never part of a PythonContainer image: the core's one ignore list (they change on every
# local run and would defeat the cache); a project's .dockerignore adds to it.
PYTHON_DEFAULT_IGNORES = DEFAULT_IGNORE_PATTERNS


@attrs.frozen
class ContextFile:
    """One entry of a build context: ``arcname`` inside the context, ``path`` on disk."""

    arcname: str
    path: str
    kind: str  # "file", "dir" or "symlink"
    mode: int  # permission bits
    size: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    inode: int = 0
    link_target: str = ""


@attrs.frozen
class BuildContext:
    """Everything an image build needs, engine-independent.

    ``name`` becomes the repository part of the tag (``xcore/<name>``); ``dockerfile`` is the
    Dockerfile text (sent as ``.xcore/Dockerfile``); ``files`` are sorted by ``arcname``;
    ``base_images`` are the ``FROM`` references whose local image ids enter the hash;
    ``source`` is the directory the files come from (for messages).
    """

    name: str
    dockerfile: str
    files: tuple[ContextFile, ...]
    base_images: tuple[str, ...]
    source: str
    entrypoint: tuple[str, ...] | None = None


def image_name(name: str) -> str:
    """A valid repository path component: lowercase letters, digits, ``.``, ``_``, ``-``."""
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("._-")
    return cleaned[:100] or "image"


def collect(root: Path, rules: IgnoreRules, prefix: str = "") -> list[ContextFile]:
    """Files, directories and symlinks under ``root`` not excluded by ``rules``, sorted.

    Paths are matched relative to ``root``; arcnames get ``prefix`` in front. Symlinks are kept
    as links (as ``docker build`` does); sockets and fifos are skipped.
    """
    found: list[ContextFile] = []
    prune = not rules.has_exceptions

    def walk(directory: Path, rel: str) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except PermissionError as exc:
            raise PackagingError(f"Cannot read {directory} for the image build context: {exc}.") from exc
        for entry in entries:
            relpath = f"{rel}/{entry.name}" if rel else entry.name
            excluded = rules.excluded(relpath)
            st = entry.stat(follow_symlinks=False)
            arcname = f"{prefix}/{relpath}" if prefix else relpath
            if stat.S_ISLNK(st.st_mode):
                if not excluded:
                    target = os.readlink(entry.path)
                    found.append(ContextFile(arcname, entry.path, "symlink", 0o777, link_target=target))
            elif stat.S_ISDIR(st.st_mode):
                if excluded and prune:
                    continue
                if not excluded:
                    found.append(ContextFile(arcname, entry.path, "dir", stat.S_IMODE(st.st_mode)))
                walk(Path(entry.path), relpath)
            elif stat.S_ISREG(st.st_mode) and not excluded:
                found.append(ContextFile(arcname, entry.path, "file", stat.S_IMODE(st.st_mode), st.st_size,
                                         st.st_mtime_ns, st.st_ctime_ns, st.st_ino))

    walk(root, "")
    return found


# -- context builders ---------------------------------------------------------------------


def python_container_context(spec: PythonContainer, default_base_image: str | None = None) -> BuildContext:
    """The context for XManager's ``PythonContainer``.

    As in XManager the project directory is placed in the context under its own name, so
    ``docker_instructions`` may say ``COPY <project>/ ...``. Without ``docker_instructions``
    the image installs ``requirements.txt`` (when present, as its own cached layer), copies
    the project to ``/app`` (``/app/<project>`` with ``use_deep_module``) and works there.
    The entrypoint becomes the image's ``ENTRYPOINT``; job args are appended at run time.
    """
    project = Path(spec.path).expanduser().resolve()
    if not project.is_dir():
        raise PackagingError(f"python_container(path={spec.path!r}): {project} is not a directory.")
    base = spec.base_image or default_base_image or os.environ.get("XLOCAL_BASE_IMAGE") or (
        f"python:{sys.version_info.major}.{sys.version_info.minor}"
    )
    dirname = project.name
    if isinstance(spec.entrypoint, ModuleName):
        top = spec.entrypoint.module_name.split(".")[0]
        module_root = project.parent if spec.use_deep_module else project
        if not ((module_root / top).is_dir() or (module_root / f"{top}.py").is_file()):
            where = f"{module_root / top}/ or {module_root / (top + '.py')}"
            raise PackagingError(
                f"python_container(entrypoint=ModuleName({spec.entrypoint.module_name!r})): neither {where} exists. "
                + ("With use_deep_module=True the module name starts with the project directory's name."
                   if spec.use_deep_module else "Set path= to the directory that contains the module.")
            )
    entrypoint = tuple(entrypoint_argv(spec.entrypoint, python="python3"))
    lines = [f"FROM {base}", "ENV PYTHONUNBUFFERED=1"]
    if spec.docker_instructions is not None:
        lines += list(spec.docker_instructions)
    else:
        target = f"{WORKDIR}/{dirname}" if spec.use_deep_module else WORKDIR
        if (project / "requirements.txt").is_file():
            lines += [
                f"COPY {dirname}/requirements.txt {target}/requirements.txt",
                f"RUN python3 -m pip install --no-cache-dir -r {target}/requirements.txt",
            ]
        lines += [f"COPY {dirname}/ {target}/", f"WORKDIR {WORKDIR}"]
    lines.append("ENTRYPOINT " + json.dumps(list(entrypoint)))
    rules = IgnoreRules.from_file(project / ".dockerignore", PYTHON_DEFAULT_IGNORES)
    files = [ContextFile(dirname, str(project), "dir", stat.S_IMODE(project.stat().st_mode))]
    files += collect(project, rules, prefix=dirname)
    return BuildContext(image_name(spec.name), "\n".join(lines) + "\n", tuple(files), (base,), str(project), entrypoint)


def context_for(spec: PythonContainer | Dockerfile) -> BuildContext:
    """The build context of either container spec a backend builds and pushes."""
    return python_container_context(spec) if isinstance(spec, PythonContainer) else dockerfile_context(spec)


def dockerfile_context(spec: Dockerfile) -> BuildContext:
    """The context for XManager's ``Dockerfile``: ``path`` honoring its ``.dockerignore``."""
    root = Path(spec.path).expanduser().resolve()
    if not root.is_dir():
        raise PackagingError(f"dockerfile_container(path={spec.path!r}): {root} is not a directory.")
    dockerfile = Path(spec.dockerfile).expanduser() if spec.dockerfile else root / "Dockerfile"
    if not dockerfile.is_absolute():
        dockerfile = (Path.cwd() / dockerfile) if (Path.cwd() / dockerfile).is_file() else (root / dockerfile)
    try:
        text = dockerfile.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PackagingError(
            f"dockerfile_container: no Dockerfile at {dockerfile}. Pass dockerfile= or add one to {root}."
        ) from None
    files = collect(root, IgnoreRules.from_file(root / ".dockerignore"))
    return BuildContext(image_name(spec.name), text, tuple(files), tuple(from_images(text)), str(root))


def from_images(dockerfile: str) -> list[str]:
    """The images a Dockerfile builds ``FROM`` (not earlier stages, not ``scratch``)."""
    stages: set[str] = set()
    images: list[str] = []
    joined = re.sub(r"\\\r?\n", " ", dockerfile)
    for line in joined.splitlines():
        words = line.split()
        if not words or words[0].upper() != "FROM":
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        if not args:
            continue
        ref = args[0]
        if len(args) >= 3 and args[1].upper() == "AS":
            stages.add(args[2].lower())
        if ref.lower() not in stages and ref != "scratch" and ref not in images:
            images.append(ref)
    return images


# -- content hash (file digests: the core's DigestCache, keyed by size, times and inode) -------


def content_hash(context: BuildContext, base_image_ids: Mapping[str, str], cache: DigestCache | None = None) -> str:
    """sha256 over the Dockerfile, the base images' ids and every file's path, type, mode and
    content. Modification times do not count, so touching a file does not force a rebuild."""
    cache = cache or DigestCache(None)
    h = hashlib.sha256()
    h.update(f"{HASH_VERSION}\0".encode())
    h.update(context.dockerfile.encode() + b"\0")
    for ref in sorted(context.base_images):
        h.update(f"base\0{ref}\0{base_image_ids.get(ref, 'unresolved')}\0".encode())
    for item in context.files:
        h.update(f"{item.kind}\0{item.arcname}\0{item.mode:o}\0".encode("utf-8", "surrogateescape"))
        if item.kind == "file":
            try:
                h.update(cache.digest(item.path).encode())
            except OSError as exc:
                raise PackagingError(f"Cannot read {item.path} for the image build context: {exc}.") from exc
        elif item.kind == "symlink":
            h.update(item.link_target.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    cache.save()
    return h.hexdigest()


def image_tag(context: BuildContext, digest: str, repository: str = "xcore") -> str:
    """``<repository>/<name>:<first 12 hex digits of the content hash>``."""
    return f"{repository}/{context.name}:{digest[:12]}"


def write_tar(context: BuildContext, fileobj: IO[bytes]) -> None:
    """The context as an uncompressed tar, with the Dockerfile at ``.xcore/Dockerfile``.

    Owners are 0 and times fixed, so layer caching depends on content only.
    """
    with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for item in context.files:
            info = tarfile.TarInfo(item.arcname)
            info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = item.mode, 0, 0, 0, "", ""
            if item.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif item.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, item.link_target
                tar.addfile(info)
            else:
                with open(item.path, "rb") as handle:
                    info.size = os.fstat(handle.fileno()).st_size
                    tar.addfile(info, handle)
        data = context.dockerfile.encode()
        for name, payload in ((".xcore", None), (DOCKERFILE_ARCNAME, data)):
            info = tarfile.TarInfo(name)
            info.mtime = 0
            if payload is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(payload), 0o644
                tar.addfile(info, io.BytesIO(payload))


def summarize(files: Iterable[ContextFile]) -> str:
    items = [f for f in files if f.kind == "file"]
    size = sum(f.size for f in items)
    return f"{len(items)} files, {size / 1e6:.1f} MB"
