"""Experiment trackers (W&B, Neptune, TensorBoard...): per-job environment and links.

When a job is recorded, the core asks every plugin's ``xcore_job_tracking`` hook for
environment variables to add to the job (a tracker's project, run group, run name and tags,
which the tracker's own client reads inside the job) and for links to the job's page in the
tracker (shown by ``xcore show`` and ``xcore ui``). The tracker's library is only needed
inside the job, never where xcore runs: xcore only writes environment variables and URLs.

The built-in integrations (``xcore.trackers.builtin``) switch on from the launcher's
environment; see README "Trackers".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from xcore import datamodel

if TYPE_CHECKING:
    from xcore.hooks.host import PluginHost


@datamodel.frozen
class TrackedJob:
    """What a tracker hook knows about a job when it is recorded (before it is launched).

    - ``experiment_id``, ``experiment_title``, ``tags``: the experiment (the run group).
    - ``work_unit_id``, ``job_name``: the work unit (the run) and the job's name in it.
    - ``args``: the work unit's arguments as given to ``experiment.add`` (a dict for a sweep).
    - ``env``: the job's own environment so far (the user's values win over a hook's).
    - ``launcher_env``: the environment of the process recording the job (where xcore runs),
      which is where a tracker's settings (``WANDB_PROJECT``...) are read from.
    """

    experiment_id: int
    experiment_title: str
    tags: tuple[str, ...]
    work_unit_id: int
    job_name: str
    args: object
    env: Mapping[str, str]
    launcher_env: Mapping[str, str]

    @property
    def run_group(self) -> str:
        """The tracker's group for the whole experiment: ``xcore-<experiment id>``."""
        return f"xcore-{self.experiment_id}"

    @property
    def run_name(self) -> str:
        """The tracker's run name: ``xcore-<experiment>/<work unit>`` (the jobs of a job group
        share it; ``XCORE_JOB_NAME`` tells them apart)."""
        return f"xcore-{self.experiment_id}/{self.work_unit_id}"


@datamodel.frozen
class JobTracking:
    """What a tracker hook adds to a job: ``env`` (variables; never overriding the user's own)
    and ``links`` (name, e.g. ``"wandb"``, to a URL; ``http(s)`` URLs become links in the
    dashboard, anything else, such as a log directory, is shown as text)."""

    env: Mapping[str, str] = attrs.field(factory=dict)
    links: Mapping[str, str] = attrs.field(factory=dict)


def job_tracking(host: PluginHost, job: TrackedJob) -> JobTracking:
    """Every plugin's contribution for one job, merged: env values of earlier answers win,
    and the job's own env wins over all of them."""
    env: dict[str, str] = {}
    links: dict[str, str] = {}
    answers: Sequence[JobTracking | None] = host.pm.hook.xcore_job_tracking(job=job)
    for answer in reversed(answers):  # pluggy calls the last registered first; keep registration order
        if answer is None:
            continue
        env.update({str(k): str(v) for k, v in answer.env.items()})
        links.update({str(k): str(v) for k, v in answer.links.items()})
    for key in job.env:
        env.pop(key, None)
    return JobTracking(env=env, links=links)


def tracking_for(host: PluginHost, launcher_env: Mapping[str, str]) -> Callable[[TrackedJob], JobTracking] | None:
    """``job_tracking`` bound to ``host``, or None when no hook would add anything to any job:
    the built-in plugin is the only one implementing ``xcore_job_tracking`` and none of its
    trackers is switched on in ``launcher_env``. Decided once per experiment, so a sweep
    without trackers pays no hook call (nor a ``TrackedJob``) per job."""
    from xcore.trackers.builtin import enabled

    implementers = {impl.plugin_name for impl in host.pm.hook.xcore_job_tracking.get_hookimpls()}
    infos = host.infos
    if all(name in infos and infos[name].builtin for name in implementers) and not enabled(launcher_env):
        return None
    return lambda job: job_tracking(host, job)
