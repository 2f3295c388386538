"""xcore-xgcp: run work units as Google Vertex AI custom jobs.

``xgcp.Vertex()`` is the executor (XManager's ``xm_local.Vertex`` names: ``requirements``,
``tensorboard``, ``Vertex.Spec(push_image_tag=...)``). A job becomes one CustomJob, a
JobGroup one CustomJob with worker pools, a sweep one CustomJob per work unit created
concurrently::

    import xcore as xm
    import xgcp

    with xm.create_experiment("sweep") as experiment:
        [exe] = experiment.package([xm.container(xgcp.Vertex.Spec(), "us-docker.pkg.dev/p/r/train:1")])
        for lr in (0.1, 0.01):
            experiment.add(xm.Job(exe, xgcp.Vertex(requirements=xm.JobRequirements(t4=1)), args={"lr": lr}))

Targets (project, location, registry...) are named in ``vertex.toml`` (``xgcp.config``).
``import xgcp`` loads no Google library; the Vertex client is imported on first use.
"""

from __future__ import annotations

from xcore.plugin import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Vertex": "xgcp.executors",
    "VertexSpec": "xgcp.executors",
    "TensorboardCapability": "xgcp.executors",
    "VertexExecutable": "xgcp.executors",
    "VertexHandle": "xgcp.executors",
    "select_machine": "xgcp.machines",
    "Target": "xgcp.config",
}

__all__ = ["Target", "TensorboardCapability", "Vertex", "VertexExecutable", "VertexHandle", "VertexSpec",
           "__version__", "select_machine"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
