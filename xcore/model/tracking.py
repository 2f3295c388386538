"""What a tracker hook is told about a job and what it adds to it (``xcore_job_tracking``).

Plain data, shared by the hook specification, the built-in trackers and the runtime that
asks every plugin (``xcore.runtime.tracker_links``)."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from xcore.model import datamodel


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
