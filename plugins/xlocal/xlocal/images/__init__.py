"""Image building for xcore backends, independent of any executor.

Used by ``xlocal.Local`` for containers; meant for the Kubernetes and Vertex AI backends too,
so it depends only on ``xcore`` and (lazily) on the ``docker`` SDK. Three steps::

    from xlocal import images

    context = images.python_container_context(spec)       # files + Dockerfile, no engine
    client = images.connect()                              # DOCKER_HOST or the local socket
    built = images.ensure_image(client, context, progress=progress, cache_dir=cache)
    built.tag       # 'xcore/<name>:<hash12>', built.built is False when nothing changed

The content hash is sha256 over the generated Dockerfile, the base images' ids, and every
context file's path, type, permission bits and content (``.dockerignore`` honored;
modification times ignored). An engine that already has the tag is not asked to build.

Public API: ``BuildContext``, ``ContextFile``, ``python_container_context``,
``dockerfile_context``, ``content_hash``, ``image_tag``, ``write_tar``, ``IgnoreRules``,
``ensure_image``, ``BuiltImage``, ``BuildError``, ``connect``, ``engine_url``,
``EngineUnavailableError``.
"""

from __future__ import annotations

from xlocal.images.build import BuildError, BuiltImage, ensure_image, resolve_base_images
from xlocal.images.context import (
    BuildContext,
    ContextFile,
    DigestCache,
    content_hash,
    dockerfile_context,
    image_tag,
    python_container_context,
    write_tar,
)
from xlocal.images.engine import EngineUnavailableError, connect, engine_url
from xlocal.images.ignore import IgnoreRules

__all__ = [
    "BuildContext", "BuildError", "BuiltImage", "ContextFile", "DigestCache", "EngineUnavailableError",
    "IgnoreRules", "connect", "content_hash", "dockerfile_context", "engine_url", "ensure_image",
    "image_tag", "python_container_context", "resolve_base_images", "write_tar",
]
