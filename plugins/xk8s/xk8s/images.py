"""Build and push images for Kubernetes, tagged by content, with the ``docker`` CLI.

The tag is a digest of the Dockerfile text and every shipped file (the shared ignore list
applies), so an unchanged project is neither rebuilt (the tag exists locally) nor pushed
again (the registry already has the tag). ``BUILDS`` and ``PUSHES`` record what this process
did, for tests and benchmarks.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from xcore import plugin as xp

BUILDS: list[str] = []
PUSHES: list[str] = []
DEFAULT_BASE = "python:3.11-slim"
_MANIFEST_TYPES = ("application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
                   "application/vnd.docker.distribution.manifest.list.v2+json, "
                   "application/vnd.docker.distribution.manifest.v2+json")


def python_dockerfile(spec: xp.PythonContainer) -> str:
    instructions = list(spec.docker_instructions) if spec.docker_instructions is not None else [
        "COPY . /workdir",
        "WORKDIR /workdir",
        "RUN if [ -f requirements.txt ]; then python3 -m pip install --no-cache-dir -r requirements.txt; fi",
    ]
    return "\n".join([f"FROM {spec.base_image or DEFAULT_BASE}", *instructions, "ENV PYTHONPATH=/workdir", ""])


def content_tag(dockerfile: str, project: Path) -> str:
    digest = hashlib.sha256(dockerfile.encode())
    for relpath, path in xp.iter_project_files(project):
        digest.update(f"\0{relpath}\0{xp.file_digest(path)}".encode())
    return digest.hexdigest()[:20]


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise xp.PackagingError("xk8s: building an image needs the docker CLI (install Docker)") from None


def registry_has(image: str) -> bool:
    """Does the registry already serve ``image`` (``host/repo:tag``)? Unknown counts as no."""
    host, _, rest = image.partition("/")
    repo, _, tag = rest.rpartition(":")
    scheme = "http" if host.startswith(("127.0.0.1", "localhost")) else "https"
    request = urllib.request.Request(f"{scheme}://{host}/v2/{repo}/manifests/{tag}", method="HEAD",
                                     headers={"Accept": _MANIFEST_TYPES})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False  # 404, or a registry that needs a login: docker push decides


def build_and_push(dockerfile: str, project: Path, registry: str, name: str,
                   progress: xp.Progress | None = None) -> str:
    """``registry/name:<content digest>``, built and pushed only if missing."""
    repo = re.sub(r"[^a-z0-9._/-]+", "-", name.lower()).strip("-._") or "xcore"
    image = f"{registry.rstrip('/')}/{repo}:{content_tag(dockerfile, project)}"
    if registry_has(image):
        return image
    if _docker("image", "inspect", image).returncode != 0:
        if progress:
            progress.message(f"xk8s: building {image}")
        with tempfile.TemporaryDirectory(prefix="xk8s-build-") as tmp:
            context = Path(tmp)
            for relpath, path in xp.iter_project_files(project):
                (context / relpath).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, context / relpath)
            (context / ".xk8s.Dockerfile").write_text(dockerfile)
            result = _docker("build", "-q", "-t", image, "-f", str(context / ".xk8s.Dockerfile"), str(context))
        if result.returncode != 0:
            raise xp.PackagingError(f"xk8s: docker build of {image} failed: {result.stderr.strip()[-1500:]}")
        BUILDS.append(image)
    if progress:
        progress.message(f"xk8s: pushing {image}")
    result = _docker("push", "-q", image)
    if result.returncode != 0:
        raise xp.PackagingError(f"xk8s: docker push {image} failed: {result.stderr.strip()[-800:]} "
                                "(docker login to the registry?)")
    PUSHES.append(image)
    return image
