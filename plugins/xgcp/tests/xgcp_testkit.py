"""Test helpers that read an experiment back from the store and call hooks on stored handles.

The plugin API 1.0 has no public way to read every job record of an experiment (the
public ``launched_jobs`` leaves out jobs that failed to launch) or to call a hook on a stored
handle; the contract suite itself uses ``xcore.launch.registry.open_store`` and
``xcore.hooks.host.get_host``. Those core imports are kept here, in one place.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import xcore as xm


def jobs(experiment_id: int) -> list[Any]:
    from xcore.launch.registry import open_store

    return [job for unit in open_store().work_units(experiment_id) for job in unit.jobs]


def wait(experiment_id: int, timeout: float = 30) -> list[Any]:
    xm.get_experiment(experiment_id).wait_until_complete(timeout=timeout)
    return jobs(experiment_id)


def host() -> Any:
    from xcore.hooks.host import get_host  # no public equivalent (see the module docstring)

    return get_host()


def logs(job: Any, follow: bool = False) -> Any:
    h = host()
    return h.job_logs(job.handle_kind, h.serializer.load(job.handle), follow)


def states(experiment_id: int) -> list[Any]:
    found = jobs(experiment_id)
    h = host()
    return h.job_states(found[0].handle_kind, [h.serializer.load(j.handle) for j in found])


def xcore_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``xcore ARGS`` in a new process."""
    script = "import sys\nfrom xcore.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120,
                          env=env or dict(os.environ), check=False)
