"""How to find one launched job again, from any process: where, which Job, which index."""

from __future__ import annotations

import attrs

from xcore import plugin as xp


@attrs.define
class KubernetesHandle(xp.JobHandle):
    """One trial: index ``index`` of the Job (or JobSet role) ``name`` in ``namespace``.

    ``launch`` is the label value shared by everything one launch created; status asks for
    all of them with one LIST per namespace. ``shape`` is ``"job"`` or ``"jobset"`` (a field named
    ``kind`` would clash with the stored kind).
    """

    context: str | None
    namespace: str
    name: str
    index: int = 0
    launch: str = ""
    shape: str = "job"
    role: str | None = None
    #: The attempt this submission started as (``LaunchRequest.attempt``); the pods Kubernetes
    #: replaced since count on from it.
    attempt: int = 1

    @property
    def job_name(self) -> str:
        """The batch/v1 Job that runs this trial (JobSet Jobs are ``<set>-<role>-0``)."""
        return f"{self.name}-{self.role}-0" if self.shape == "jobset" else self.name
