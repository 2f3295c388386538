"""The image builder every backend shares: build contexts, content-tagged builds on a
Docker-compatible engine, and publishing to a registry.

Part of the core, optional: the ``docker`` SDK comes with ``pip install 'xcore-core[images]'``
(``xcore-xlocal[docker]`` pulls it in too) and is imported only when an engine is used, so
importing this module stays cheap. Plugins import it as ``from xcore import images``::

    from xcore import images

    context = images.python_container_context(spec)       # files + Dockerfile, no engine
    client = images.connect()                              # DOCKER_HOST or the local socket
    built = images.ensure_image(client, context, progress=progress, cache_dir=cache)
    built.tag       # 'xcore/<name>:<hash12>'; built.built is False when nothing changed

    # a remote backend: build if the engine lacks it, push if the registry lacks it
    # (client None: connect only if needed; an unchanged project never imports the SDK)
    published = images.publish(None, context, "127.0.0.1:5000/team", push_tag=None,
                               progress=progress, cache_dir=cache)
    published.reference   # '127.0.0.1:5000/team/<name>:<hash12>'

The content hash is sha256 over the generated Dockerfile, the base images' ids, and every
context file's path, type, permission bits and content (``.dockerignore`` and the core's
ignore list honoured; modification times ignored). An engine that already has the tag is not
asked to build; a registry that already serves it is not sent anything. ``docs/plugins.md``
("Building and pushing images") describes it for plugin authors.
"""

from __future__ import annotations

from xcore.images.build import BuildError, BuiltImage, ensure_image, resolve_base_images
from xcore.images.context import (
    BuildContext,
    ContextFile,
    DigestCache,
    content_hash,
    context_for,
    dockerfile_context,
    image_tag,
    python_container_context,
    write_tar,
)
from xcore.images.engine import EngineUnavailableError, connect, engine_url, import_docker
from xcore.images.ignore import IgnoreRules
from xcore.images.registry import (
    BUILDS,
    PUSHES,
    PublishedImage,
    RegistryAuthError,
    RegistryError,
    RegistryUnreachableError,
    check_registry,
    publish,
    push,
    registry_of,
    remote_digest,
    split_reference,
)

__all__ = [
    "BUILDS", "PUSHES", "BuildContext", "BuildError", "BuiltImage", "ContextFile", "DigestCache",
    "EngineUnavailableError", "IgnoreRules", "PublishedImage", "RegistryAuthError", "RegistryError",
    "RegistryUnreachableError", "check_registry", "connect", "content_hash", "context_for", "dockerfile_context",
    "engine_url", "ensure_image", "image_tag", "import_docker", "publish", "push", "python_container_context",
    "registry_of", "remote_digest", "resolve_base_images", "split_reference", "write_tar",
]
