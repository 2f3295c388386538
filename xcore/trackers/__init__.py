"""Experiment trackers (W&B, Neptune, TensorBoard...): per-job environment and links.

When a job is recorded, the core asks every plugin's ``xcore_job_tracking`` hook for
environment variables to add to the job (a tracker's project, run group, run name and tags,
which the tracker's own client reads inside the job) and for links to the job's page in the
tracker (shown by ``xcore show`` and ``xcore ui``). The tracker's library is only needed
inside the job, never where xcore runs: xcore only writes environment variables and URLs.

The built-in integrations (``xcore.trackers.builtin``) switch on from the launcher's
environment; see docs/dashboard.md, "Trackers". Floor 2, on the model: the data a tracker hook gets and
gives is ``xcore.model.tracking``; the runtime asks the hooks (``xcore.runtime.tracker_links``).
"""

from __future__ import annotations

from xcore.model.tracking import JobTracking, TrackedJob

__all__ = ["JobTracking", "TrackedJob"]
