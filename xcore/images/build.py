"""Building images on an engine, skipped when an image with the content tag exists."""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

import attrs

from xcore.images.context import (
    DOCKERFILE_ARCNAME,
    BuildContext,
    DigestCache,
    content_hash,
    image_tag,
    summarize,
    write_tar,
)
from xcore.images.engine import import_docker
from xcore.plugin import PackagingError, Progress, private_dir

HASH_LABEL = "org.xcore.content-hash"
SOURCE_LABEL = "org.xcore.source"
_STEP = re.compile(r"^\s*step\s+(\d+)/(\d+)\s*:?\s*(.*)$", re.IGNORECASE)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NOISE = re.compile(r"^\s*(---> |Removing intermediate container |Successfully built |Successfully tagged )")
TAIL_LINES = 25


class BuildError(PackagingError):
    """An image build failed; the message names the failing step and its last output lines."""


@attrs.frozen
class BuiltImage:
    """The result of ``ensure_image``: the tag, the engine's image id, whether a build ran,
    the build's duration and the file holding its full output (None when skipped)."""

    tag: str
    image_id: str
    built: bool
    seconds: float
    log_path: Path | None = None
    content_hash: str = ""


def resolve_base_images(client: Any, context: BuildContext, progress: Progress | None = None) -> dict[str, str]:
    """Local image ids of the context's base images, pulling the ones that are missing."""
    docker = import_docker()
    ids: dict[str, str] = {}
    for ref in context.base_images:
        if "$" in ref:
            continue  # set by a build ARG: cannot be known before the build
        try:
            ids[ref] = client.api.inspect_image(ref)["Id"]
            continue
        except docker.errors.ImageNotFound:
            pass
        if progress:
            progress.update("pulling base image", detail=ref)
        try:
            client.images.pull(ref)
            ids[ref] = client.api.inspect_image(ref)["Id"]
        except docker.errors.APIError as exc:
            raise BuildError(
                f"Base image {ref!r} is not on this engine and could not be pulled: {exc.explanation or exc}. "
                "Pull, load or build it first (`docker images` lists local images), or choose another "
                "base_image=."
            ) from None
    return ids


def ensure_image(
    client: Any,
    context: BuildContext,
    *,
    progress: Progress | None = None,
    cache_dir: Path | None = None,
    repository: str = "xcore",
    dry_run: bool = False,
) -> BuiltImage:
    """Make sure the image for ``context`` exists on the engine ``client`` talks to.

    The tag is ``<repository>/<name>:<hash12>`` where the hash covers the Dockerfile, the base
    images' ids and the context's files (see ``content_hash``). If the engine already has that
    tag nothing is built or sent. Otherwise the context is streamed to the engine; progress
    reports each step and its latest output line, and a failure raises ``BuildError`` with the
    failing step and the last lines of its output. ``cache_dir`` keeps file digests and logs.
    ``dry_run`` only computes the tag and hash (``image_id`` is empty, ``built`` False).
    """
    docker = import_docker()
    started = time.monotonic()
    base_ids = resolve_base_images(client, context, progress)
    cache = DigestCache(cache_dir / "digests.json" if cache_dir else None)
    digest = content_hash(context, base_ids, cache)
    tag = image_tag(context, digest, repository)
    if dry_run:
        return BuiltImage(tag, "", False, time.monotonic() - started, content_hash=digest)
    try:
        existing = client.api.inspect_image(tag)
        if (existing.get("Config") or {}).get("Labels", {}).get(HASH_LABEL) == digest:
            return BuiltImage(tag, existing["Id"], False, time.monotonic() - started, content_hash=digest)
    except docker.errors.ImageNotFound:
        pass
    log_path = None
    if cache_dir is not None:
        log_path = cache_dir / "logs" / f"{tag.replace('/', '_').replace(':', '_')}.log"
        private_dir(log_path.parent)
    task = f"building {tag}"
    if progress:
        progress.message(f"{task} from {context.source} ({summarize(context.files)})")
    with tempfile.SpooledTemporaryFile(max_size=64 << 20) as tar, _open_log(log_path) as log:
        write_tar(context, tar)
        tar.seek(0)
        image_id = _run_build(client, tar, tag, digest, context, progress, task, log, log_path)
    seconds = time.monotonic() - started
    if progress:
        progress.message(f"built {tag} in {seconds:.1f} s")
    return BuiltImage(tag, image_id, True, seconds, log_path, digest)


def _open_log(path: Path | None) -> Any:
    if path is None:
        import contextlib

        return contextlib.nullcontext(None)
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8")


def _run_build(client: Any, tar: Any, tag: str, digest: str, context: BuildContext, progress: Progress | None,
               task: str, log: Any, log_path: Path | None) -> str:
    docker = import_docker()
    step, total, instruction = 0, 0, ""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    image_id = ""
    error: str | None = None
    pending = ""
    try:
        stream = client.api.build(
            fileobj=tar, custom_context=True, tag=tag, dockerfile=DOCKERFILE_ARCNAME, rm=True, forcerm=True,
            decode=True, labels={HASH_LABEL: digest, SOURCE_LABEL: context.source[:200]},
        )
        for chunk in stream:
            if "error" in chunk:
                error = str(chunk.get("error") or (chunk.get("errorDetail") or {}).get("message") or "").strip()
                continue
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("ID"):
                image_id = aux["ID"]
            text = chunk.get("stream")
            if not text:
                continue
            if log is not None:
                log.write(text)
            pending += text
            *lines, pending = re.split(r"\r?\n|\r", pending)
            for line in lines:
                line = _ANSI.sub("", line)
                match = _STEP.match(line)
                if match:
                    step, total, instruction = int(match[1]), int(match[2]), match[3].strip()
                    tail.clear()
                elif not line.strip() or _NOISE.match(line):
                    continue
                else:
                    tail.append(line.rstrip())
                if progress:
                    progress.update(task, step or None, total or None, line.strip()[:200])
    except docker.errors.APIError as exc:
        error = str(exc.explanation or exc)
    if pending.strip():
        tail.append(_ANSI.sub("", pending).rstrip())
    if error is None and not image_id:
        try:
            image_id = client.api.inspect_image(tag)["Id"]
        except docker.errors.ImageNotFound:
            error = "the engine reported no error but produced no image"
    if error is not None:
        where = f"step {step}/{total} ({instruction})" if step else "before the first step"
        output = "\n".join(f"    {line}" for line in tail) or "    (no output)"
        full = f" Full output: {log_path}." if log_path else ""
        raise BuildError(
            f"Building image {tag} from {context.source} failed at {where}: {error}\n"
            f"  Last output lines of that step:\n{output}\n"
            f"  Fix the step (the generated Dockerfile is below), then launch again.{full}\n"
            + "".join(f"    | {line}\n" for line in context.dockerfile.splitlines())
        )
    return image_id
