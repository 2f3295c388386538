"""xcore-xlocal: run work units on this machine, as processes or containers.

``xlocal.Local()`` is XManager's ``xm_local.Local()``::

    import xcore as xm
    import xlocal

    [exe] = experiment.package([xm.binary(xlocal.Local.Spec(), "train.sh")])
    experiment.add(xm.Job(exe, xlocal.Local(max_parallel=4), args={"lr": 0.1}))

Containers use the same executor (``pip install 'xcore-xlocal[docker]'``)::

    [exe] = experiment.package([xm.python_container(
        xlocal.Local.Spec(), xm.ModuleName("train"), path=".", base_image="python:3.11")])
    experiment.add(xm.Job(exe, xlocal.Local(requirements=xm.JobRequirements(cpu=2, memory="4GiB"))))
"""

from __future__ import annotations

from xcore.plugin import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    # xm_local's experiment functions (xcore's own: experiments are backend-neutral)
    "create_experiment": "xcore",
    "get_experiment": "xcore",
    "list_experiments": "xcore",
    "Local": "xlocal.executors",
    "LocalSpec": "xlocal.executors",
    "DockerOptions": "xlocal.executors",
    "LocalProcess": "xlocal.executables",
    "LocalContainer": "xlocal.executables",
    "ProcessHandle": "xlocal.handles",
    "ContainerHandle": "xlocal.handles",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
