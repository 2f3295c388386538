"""Images for Vertex: ``xm.python_container`` / ``xm.dockerfile_container`` built with the
core's image builder (``xcore.images``) and pushed to the target's registry (Artifact Registry
in production), tagged by content, so an unchanged project is neither rebuilt nor pushed again.

The registry is ``Vertex.Spec(registry=...)``, else the target's ``registry`` in
``vertex.toml``, else ``XGCP_REGISTRY``. ``Vertex.Spec(push_image_tag=...)`` behaves as in
XManager: the image is pushed as that full reference and the CustomJob runs it (the content tag
is pushed next to it, which is what lets a relaunch skip the build); with no registry
configured, the image goes to the repository ``push_image_tag`` names.
"""

from __future__ import annotations

import os
from typing import Any

from xcore import plugin as xp
from xgcp.executors import VertexExecutable, VertexSpec

ENV_REGISTRY = "XGCP_REGISTRY"


def registry_for(spec: VertexSpec) -> str:
    from xcore import images
    from xgcp import config

    if spec.registry:
        return spec.registry
    targets, default = config.load_targets()
    chosen = spec.target or os.environ.get(config.ENV_TARGET) or default
    if chosen and chosen not in targets:
        raise xp.ConfigurationError(
            f"Vertex target {chosen!r} is not in {config.config_path()}; add [targets.{chosen}] with a project.")
    registry = (targets[chosen].registry if chosen else None) or os.environ.get(ENV_REGISTRY)
    if not registry and spec.push_image_tag:
        registry = images.registry_of(spec.push_image_tag)
    if not registry:
        raise xp.PackagingError(
            "xgcp: building an image needs a registry to push to: set registry = "
            "\"REGION-docker.pkg.dev/PROJECT/REPO\" in the target in " + str(config.config_path())
            + f", xgcp.Vertex.Spec(registry=...) or push_image_tag=..., or {ENV_REGISTRY}.")
    return registry


def build_and_push(packageable: xp.Packageable, spec: Any, context: xp.PackagingContext) -> VertexExecutable:
    from xcore import images

    executor_spec: VertexSpec = packageable.executor_spec  # type: ignore[assignment]
    registry = registry_for(executor_spec)  # before any work: a missing setting is the first thing said
    build_context = images.context_for(spec)
    published = images.publish(None, build_context, registry,
                               push_tag=executor_spec.push_image_tag, progress=context.progress,
                               cache_dir=context.cache_dir / "images")
    # The image's ENTRYPOINT runs the program; job args are appended as container args.
    return VertexExecutable(name=spec.name, image_uri=published.reference)
