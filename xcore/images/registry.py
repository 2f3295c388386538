"""Publishing images to a registry: build only when the engine lacks the content tag, push
only when the registry lacks it.

A remote backend (Kubernetes, Vertex AI) runs ``publish(client, context, registry)``. The
image is named ``<registry>/<name>:<content hash>``, so the registry itself says whether an
unchanged project was already published: one manifest lookup, and neither a build nor an
upload follows. The lookup goes through the engine's distribution endpoint (what
``docker manifest inspect`` asks), so it uses the same credentials as ``docker push``
(``docker login``, credential helpers such as ``gcloud auth configure-docker``); xcore never
reads, prints or stores them.

``BUILDS`` and ``PUSHES`` list the references this process built and pushed, so tests and
benchmarks can count them.
"""

from __future__ import annotations

import re
import time
from typing import Any

import attrs

from xcore.images.build import BuildError, ensure_image
from xcore.images.context import BuildContext
from xcore.images.engine import import_docker
from xcore.plugin import ConfigurationError, PackagingError, Progress

BUILDS: list[str] = []
PUSHES: list[str] = []

_REF = re.compile(r"^[a-z0-9]([a-z0-9._:/-]*[a-z0-9])?(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$")
_UNREACHABLE = re.compile(r"connection refused|no such host|i/o timeout|dial tcp|network is unreachable|"
                          r"no route to host|tls: |certificate|server misbehaving|timeout", re.IGNORECASE)
_DENIED = re.compile(r"unauthori[sz]ed|authentication required|denied|forbidden|no basic auth|\b40[13]\b",
                     re.IGNORECASE)
_MISSING = re.compile(r"manifest unknown|name unknown|not found|\b404\b", re.IGNORECASE)


class RegistryError(PackagingError):
    """The registry could not be asked or refused an upload; the message says what to fix."""


class RegistryUnreachableError(RegistryError):
    """Nothing answers at the registry's address."""


class RegistryAuthError(RegistryError):
    """The registry answered but refused the engine's credentials (or it had none)."""


@attrs.frozen
class PublishedImage:
    """The result of ``publish``: ``reference`` is what a job runs (``push_tag`` when given,
    else the content-tagged name); ``content_reference`` is ``<registry>/<name>:<hash12>``;
    ``built``/``pushed`` say whether this call built or uploaded anything."""

    reference: str
    content_reference: str
    content_hash: str
    built: bool
    pushed: bool
    seconds: float


def registry_host(reference: str) -> str:
    """The registry part of an image reference (``host[:port]``)."""
    first = reference.split("/", 1)[0]
    return first if ("." in first or ":" in first or first == "localhost") and "/" in reference else "docker.io"


def login_hint(host: str) -> str:
    if host.endswith("-docker.pkg.dev") or host.endswith("gcr.io"):
        return f"run `gcloud auth configure-docker {host}` (and check the account may write to it)"
    return f"run `docker login {host}`"


def check_reference(reference: str, what: str) -> str:
    if not _REF.match(reference) or "//" in reference:
        raise ConfigurationError(
            f"{what} {reference!r} is not an image reference: use lowercase HOST[:PORT]/PATH[:TAG], "
            "e.g. us-central1-docker.pkg.dev/my-project/my-repo or 127.0.0.1:5000/xcore.")
    return reference


def split_reference(reference: str) -> tuple[str, str]:
    """``(repository, tag)`` of ``host[:port]/path[:tag]`` (tag ``latest`` when absent)."""
    repo, sep, tag = reference.rpartition(":")
    if not sep or "/" in tag:
        return reference, "latest"
    return repo, tag


def registry_of(reference: str) -> str:
    """The prefix a reference's repository lives under (``host/a/b:t`` -> ``host/a``)."""
    return split_reference(reference)[0].rpartition("/")[0]


def _classify(reference: str, message: str, status: int | None) -> RegistryError | None:
    """A RegistryError for an engine answer that is not 'the tag is not there', else None."""
    host = registry_host(reference)
    first = message.strip().splitlines()[0][:300] if message.strip() else f"HTTP {status}"
    if _UNREACHABLE.search(message):
        return RegistryUnreachableError(
            f"Cannot reach the image registry {host} ({first}). Start it, or fix the registry in the target's "
            "configuration (the HOST[:PORT]/PATH images are pushed to); `curl -sS https://HOST/v2/` (http:// for "
            "a local registry) shows whether it answers.")
    if status in (401, 403) or _DENIED.search(message):
        return RegistryAuthError(
            f"The image registry {host} refused access to {reference} ({first}). To fix: {login_hint(host)}.")
    if status == 404 or _MISSING.search(message):
        return None
    return RegistryError(f"The image registry {host} could not be asked about {reference}: {first}.")


def remote_digest(client: Any, reference: str) -> str | None:
    """The manifest digest the registry serves for ``reference``, or None when it has no such
    tag. Raises RegistryUnreachableError / RegistryAuthError with what to do."""
    docker = import_docker()
    try:
        answer = client.api.inspect_distribution(reference)
    except docker.errors.APIError as exc:
        status = exc.response.status_code if exc.response is not None else None
        error = _classify(reference, str(exc.explanation or exc), status)
        if error is None:
            return None
        raise error from None
    except docker.errors.DockerException as exc:
        from xcore.images.engine import EngineUnavailableError, engine_url, unreachable_message

        raise EngineUnavailableError(unreachable_message(engine_url(), exc)) from None
    return str((answer.get("Descriptor") or {}).get("digest") or "") or None


def push(client: Any, reference: str, progress: Progress | None = None) -> None:
    """Upload ``reference`` (already tagged on the engine), reporting bytes sent."""
    docker = import_docker()
    repo, tag = split_reference(reference)
    task = f"pushing {reference}"
    layers: dict[str, tuple[int, int]] = {}
    error: str | None = None
    try:
        for chunk in client.api.push(repo, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                error = str(chunk.get("error") or (chunk.get("errorDetail") or {}).get("message") or "").strip()
                continue
            detail = chunk.get("progressDetail") or {}
            layer = chunk.get("id")
            if layer and detail.get("total"):
                layers[layer] = (int(detail.get("current") or 0), int(detail["total"]))
            elif layer and chunk.get("status") in ("Pushed", "Layer already exists"):
                size = layers.get(layer, (0, 0))[1]
                layers[layer] = (size, size)
            status = f"{chunk.get('status', '')} {layer or ''}".strip()[:160]
            if progress and status:
                done = sum(c for c, _ in layers.values()) >> 20
                total = sum(t for _, t in layers.values()) >> 20
                progress.update(task, done if total else None, total or None,
                                f"MiB uploaded, {status}" if total else status)
    except docker.errors.APIError as exc:
        error = str(exc.explanation or exc)
    if error is not None:
        classified = _classify(reference, error, None)
        if classified is not None:
            raise classified
        raise RegistryError(f"Pushing {reference} failed: {error.splitlines()[0][:300] if error else 'no reason'}.")


def _quick_look(context: BuildContext, registry: str, push_tag: str | None,
                cache_dir: Any) -> tuple[str, str] | None:
    """``(content reference, hash)`` when the engine's socket alone shows the registry already
    serves the content tag (and ``push_tag`` names the same manifest), else None: the full
    path with the SDK decides. Raises RegistryUnreachableError when the registry is down."""
    from xcore.images.context import DigestCache, content_hash, image_tag
    from xcore.images.probe import Probe

    probe = Probe.from_env()
    if probe is None:
        return None
    try:
        base_ids = {ref: probe.image_id(ref) for ref in context.base_images if "$" not in ref}
        if not all(base_ids.values()):
            return None  # a base image to pull: the SDK does it
        digest = content_hash(context, {k: v for k, v in base_ids.items() if v},
                              DigestCache(cache_dir / "digests.json" if cache_dir else None))
        content_ref = image_tag(context, digest, registry)
        digests = []
        for ref in [content_ref] + ([push_tag] if push_tag else []):
            status, data = probe.distribution(ref)
            if status != 200:
                error = _classify(ref, str(data.get("message") or ""), status)
                if isinstance(error, RegistryUnreachableError):
                    raise error
                return None  # missing, or the registry wants the credentials the SDK sends
            digests.append((data.get("Descriptor") or {}).get("digest"))
    except OSError:
        return None  # the socket did not answer: the SDK says what to do
    return (content_ref, digest) if len(set(digests)) == 1 and digests[0] else None


def publish(
    client: Any,
    context: BuildContext,
    registry: str,
    *,
    push_tag: str | None = None,
    progress: Progress | None = None,
    cache_dir: Any = None,
) -> PublishedImage:
    """Make sure the registry serves the image for ``context``; return what to run.

    ``registry`` is a prefix (``host[:port]/path``); the image goes to
    ``<registry>/<name>:<hash12>``. ``push_tag`` (XManager's ``push_image_tag``, a full
    reference) is pushed too and becomes the reference jobs run. When the registry already
    serves the content tag (and ``push_tag`` points at the same manifest) nothing is built or
    uploaded; when the engine already has the image it is only uploaded. ``client`` is a
    ``docker.DockerClient``, or None to connect (``connect()``) only when needed: an unchanged
    project is then checked without importing the SDK.
    """
    started = time.monotonic()
    registry = check_reference(registry.rstrip("/"), "Image registry")
    if push_tag:
        check_reference(push_tag, "push_image_tag")
    if progress:
        progress.update("checking image", detail=f"{context.name} in {registry}")
    if client is None:
        quick = _quick_look(context, registry, push_tag, cache_dir)
        if quick is not None:
            content_ref, digest = quick
            return PublishedImage(push_tag or content_ref, content_ref, digest, False, False,
                                  time.monotonic() - started)
        from xcore.images.engine import connect

        client = connect()
    built = ensure_image(client, context, progress=progress, cache_dir=cache_dir, repository=registry,
                         dry_run=True)
    content_ref = built.tag
    wanted = [content_ref] + ([push_tag] if push_tag and push_tag != content_ref else [])
    have = remote_digest(client, content_ref)
    stale = [ref for ref in wanted if have is None or (ref != content_ref and remote_digest(client, ref) != have)]
    if not stale:
        return PublishedImage(wanted[-1], content_ref, built.content_hash, False, False, time.monotonic() - started)
    built = ensure_image(client, context, progress=progress, cache_dir=cache_dir, repository=registry)
    if built.built:
        BUILDS.append(content_ref)
    for ref in stale:
        if ref != content_ref:
            repo, tag = split_reference(ref)
            try:
                client.api.tag(built.image_id, repo, tag=tag)
            except import_docker().errors.APIError as exc:
                raise BuildError(f"Cannot tag {content_ref} as {ref}: {exc.explanation or exc}.") from None
        push(client, ref, progress)
        PUSHES.append(ref)
        if progress:
            progress.message(f"pushed {ref}")
    return PublishedImage(wanted[-1], content_ref, built.content_hash, built.built, True, time.monotonic() - started)


def check_registry(registry: str, timeout: float = 10.0) -> str:
    """Whether the registry's HTTP API answers (``/v2/``), for the backends' check commands.

    A 401 counts as an answer: pushes authenticate through Docker's credentials, which a plain
    request does not carry. Raises RegistryUnreachableError with what to fix."""
    import urllib.error
    import urllib.request

    host = registry_host(f"{check_reference(registry.rstrip('/'), 'registry')}/probe")
    scheme = "http" if host.split(":", 1)[0] in ("127.0.0.1", "localhost", "::1") else "https"
    try:
        with urllib.request.urlopen(f"{scheme}://{host}/v2/", timeout=timeout) as response:  # noqa: S310
            return f"registry {host} answers ({response.status})"
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            return f"registry {host} answers (pushes need credentials: {login_hint(host)})"
        raise RegistryUnreachableError(
            f"The image registry {host} answered HTTP {exc.code} at /v2/: it does not look like a registry; "
            "fix the registry in the target's configuration.") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RegistryUnreachableError(
            f"Cannot reach the image registry {host} ({reason}). Start it, or fix the registry in the target's "
            "configuration.") from None
