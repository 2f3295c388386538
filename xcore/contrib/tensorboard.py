"""A TensorBoard server as an auxiliary unit, as XManager's ``xmanager.contrib.tensorboard``.

``add_tensorboard(experiment, logdir, executor)`` adds a job named ``tensorboard`` that serves
``logdir``; as an auxiliary unit it never counts toward the experiment's status. It works on
every backend through the job it builds: where the backend runs commands (xlocal, xhpc) the
job is ``python3 -m tensorboard.main`` on the machine that runs it, where it runs only images
(xk8s, xgcp) the same command in ``tensorflow/tensorflow``. TensorBoard is needed where the job
runs, never where xcore runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xcore.errors import PackagingError
from xcore.launch.experiment import Experiment
from xcore.launch.units import AuxiliaryUnitJob
from xcore.model.executables import Binary, Container
from xcore.model.job_blocks import Executable, Executor, ExecutorSpec, Job, Packageable

# The server ends itself, cleanly, after the timeout (0: never), so a detached job whose
# launcher is gone still stops; no `timeout` program is needed on the node or in the image.
_SERVE = ("import os, runpy, signal; signal.signal(signal.SIGALRM, lambda *_: os._exit(0)); "
          "signal.alarm({timeout}); runpy.run_module('tensorboard.main', run_name='__main__', alter_sys=True)")


class TensorboardProvider:
    """What the TensorBoard job runs and the args it gets (XManager's names)."""

    DEFAULT_TENSORBOARD_PORT = 6006
    DEFAULT_IMAGE = "tensorflow/tensorflow"  # XManager's base image: it has python3 and TensorBoard

    @staticmethod
    def get_tensorboard_command(timeout_secs: int, python: str = "python3") -> list[str]:
        """The argv that serves TensorBoard for ``timeout_secs`` seconds (0: no limit)."""
        if timeout_secs < 0:
            raise RuntimeError("`timeout_secs` must be a nonnegative number")
        return [python, "-c", _SERVE.format(timeout=int(timeout_secs))]

    @staticmethod
    def get_tensorboard_packageables(timeout_secs: int, executor_spec: ExecutorSpec, *, python: str = "python3",
                                     image: str = DEFAULT_IMAGE) -> list[Packageable]:
        """The command as a process, then in ``image``: the first the backend packages is used.
        (XManager's ``get_tensorboard_packageable`` builds an image on ``tensorflow/tensorflow``
        for every executor; xcore builds nothing.)"""
        program, *rest = TensorboardProvider.get_tensorboard_command(timeout_secs, python)
        return [Packageable(Binary(program), executor_spec, args=rest),
                Packageable(Container(image), executor_spec, args=[program, *rest])]

    @staticmethod
    def get_tensorboard_job_args(log_dir: str, port: int | None = None,
                                 additional_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """TensorBoard's flags: listen on every interface (so a container's port can be
        published), and ``load_fast=false`` (its fast loader fails with GKE Workload Identity);
        ``additional_args`` override them."""
        args: dict[str, Any] = {
            "logdir": log_dir,
            "port": port or TensorboardProvider.DEFAULT_TENSORBOARD_PORT,
            "host": "0.0.0.0",
            "load_fast": "false",
        }
        args.update(additional_args or {})
        return args


def _package_first(experiment: Experiment, packageables: list[Packageable]) -> Executable:
    """The first of ``packageables`` the executor's backend takes; every refusal if none."""
    refusals = []
    for packageable in packageables:
        try:
            [executable] = experiment.package([packageable])
            return executable
        except PackagingError as error:
            refusals.append(f"{type(packageable.executable_spec).__name__}: {error}")
    raise PackagingError("add_tensorboard: the executor takes neither a command nor an image: "
                         + "; ".join(refusals))


def add_tensorboard(experiment: Experiment, logdir: str, executor: Executor, timeout_secs: int = 60 * 60 * 24,
                    args: Mapping[str, Any] | None = None, *, python: str = "python3",
                    image: str = TensorboardProvider.DEFAULT_IMAGE) -> None:
    """Add a TensorBoard server for ``logdir`` to ``experiment`` as an auxiliary unit, on
    ``executor``, for ``timeout_secs`` seconds (0: until stopped). ``args`` add to or override
    TensorBoard's flags (``port``, ``host``, ...). ``python`` is the interpreter that has
    TensorBoard where a command runs; ``image`` the image where the backend runs images."""
    provider = TensorboardProvider
    packageables = provider.get_tensorboard_packageables(timeout_secs, executor.Spec(), python=python, image=image)
    executable = _package_first(experiment, packageables)
    job = Job(executable, executor, args=provider.get_tensorboard_job_args(logdir, additional_args=args),
              name="tensorboard")
    experiment.add(AuxiliaryUnitJob(job, termination_delay_secs=0))
