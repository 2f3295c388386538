"""xk8s: run xcore experiments on Kubernetes.

``import xk8s`` is cheap: the ``kubernetes`` client is imported only when a job is launched,
queried, cancelled or checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xcore.plugin import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Kubernetes": "xk8s.executors",
    "KubernetesSpec": "xk8s.executors",
    "Toleration": "xk8s.executors",
    "Volume": "xk8s.executors",
    "Image": "xk8s.executables",
    "image": "xk8s.executables",
    "KubernetesExecutable": "xk8s.executables",
    "KubernetesHandle": "xk8s.handles",
}
__all__ = ["Image", "Kubernetes", "KubernetesExecutable", "KubernetesHandle", "KubernetesSpec", "Toleration",
           "Volume", "image"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from xk8s.executables import Image, KubernetesExecutable, image
    from xk8s.executors import Kubernetes, KubernetesSpec, Toleration, Volume
    from xk8s.handles import KubernetesHandle
