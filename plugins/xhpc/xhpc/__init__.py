"""xcore-xhpc: run work units on Slurm and Grid Engine clusters, over SSH or on the login node.

``xhpc.Slurm()`` and ``xhpc.GridEngine()`` are executors; a sweep of many work units with
the same executable and executor becomes one array job::

    import xcore as xm
    import xhpc

    with xm.create_experiment("sweep") as experiment:
        [exe] = experiment.package([xm.Packageable(
            xhpc.PythonPackage(xm.ModuleName("mypkg.train"), path="."), xhpc.Slurm.Spec())])
        for lr in (0.1, 0.01, 0.001):
            experiment.add(xm.Job(exe, xhpc.Slurm(cluster="uni", partition="gpu", time_limit="1:00:00"),
                                  args={"lr": lr}))

Clusters are named in ``clusters.toml`` in the xcore config directory (see ``xhpc.config``).
"""

from __future__ import annotations

from xcore.plugin import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Slurm": "xhpc.executors",
    "SlurmSpec": "xhpc.executors",
    "GridEngine": "xhpc.executors",
    "GridEngineSpec": "xhpc.executors",
    "PythonPackage": "xhpc.executables",
    "UniversalPackage": "xhpc.executables",
    "Fileset": "xhpc.executables",
    "SingularityContainer": "xhpc.executables",
    "Command": "xhpc.executables",
    "ClusterExecutable": "xhpc.executables",
    "SlurmHandle": "xhpc.handles",
    "GridEngineHandle": "xhpc.handles",
    "Cluster": "xhpc.config",
    "load_clusters": "xhpc.config",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
