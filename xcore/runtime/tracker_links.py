"""Asks every plugin's ``xcore_job_tracking`` hook for a job's tracker environment and links.

Decided once per experiment (``tracking_for``), so a sweep without trackers pays no hook call
per job. The data exchanged is in ``xcore.model.tracking``; the built-in integrations are in
``xcore.trackers``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from xcore.model.tracking import JobTracking, TrackedJob

if TYPE_CHECKING:
    from xcore.hooks.host import PluginHost


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
