"""Built-in tracker integrations: Weights & Biases, Neptune and TensorBoard.

Each switches on when its setting is in the environment of the process that launches (so
nothing changes for anyone who does not use it), and only writes environment variables the
tracker's own client reads inside the job, plus a link. None of these libraries is imported
here: they need not be installed where xcore runs.

Every enabled tracker also sets ``XCORE_RUN_GROUP`` (``xcore-<experiment>``),
``XCORE_RUN_NAME`` (``xcore-<experiment>/<work unit>``) and ``XCORE_RUN_TAGS`` (JSON list),
for clients that take these as arguments rather than from the environment.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from urllib.parse import quote

from xcore.model.tracking import JobTracking, TrackedJob


def _common(job: TrackedJob) -> dict[str, str]:
    return {
        "XCORE_EXPERIMENT_ID": str(job.experiment_id),
        "XCORE_WORK_UNIT_ID": str(job.work_unit_id),
        "XCORE_JOB_NAME": job.job_name,
        "XCORE_RUN_GROUP": job.run_group,
        "XCORE_RUN_NAME": job.run_name,
        "XCORE_RUN_TAGS": json.dumps(list(job.tags), ensure_ascii=False),
    }


def _run_id(job: TrackedJob) -> str:
    """Unique in the tracker's project even across metadata stores (ids restart per store)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", f"xcore-{job.experiment_id}-{job.work_unit_id}-{job.job_name}")
    return f"{name}-{os.urandom(4).hex()}"


def wandb(job: TrackedJob) -> JobTracking | None:
    """On when ``WANDB_PROJECT`` is set: group = experiment, name = work unit, tags =
    the experiment's tags; the link needs ``WANDB_ENTITY`` (W&B's URLs name it)."""
    env = job.launcher_env
    project = env.get("WANDB_PROJECT")
    if not project:
        return None
    run_id = _run_id(job)
    out = {**_common(job), "WANDB_PROJECT": project, "WANDB_RUN_GROUP": job.run_group, "WANDB_NAME": job.run_name,
           "WANDB_RUN_ID": run_id, "WANDB_TAGS": ",".join(t.replace(",", " ") for t in job.tags)}
    for name in ("WANDB_ENTITY", "WANDB_BASE_URL", "WANDB_API_KEY", "WANDB_MODE"):
        if env.get(name):
            out[name] = env[name]  # a key is redacted in the store like any secret-named variable
    links = {}
    entity = env.get("WANDB_ENTITY")
    if entity:
        base = env.get("WANDB_BASE_URL", "https://wandb.ai").rstrip("/")
        if base.endswith("api.wandb.ai"):
            base = "https://wandb.ai"
        links["wandb"] = f"{base}/{quote(entity)}/{quote(project)}/runs/{run_id}"
    return JobTracking(env=out, links=links)


def neptune(job: TrackedJob) -> JobTracking | None:
    """On when ``NEPTUNE_PROJECT`` (``workspace/project``) is set: ``NEPTUNE_CUSTOM_RUN_ID``
    names the run; the job passes ``XCORE_RUN_NAME``/``XCORE_RUN_TAGS``/``XCORE_RUN_GROUP`` to
    ``neptune.init_run(name=..., tags=...)`` (Neptune's client reads no name from the env)."""
    env = job.launcher_env
    project = env.get("NEPTUNE_PROJECT")
    if not project:
        return None
    run_id = _run_id(job)
    out = {**_common(job), "NEPTUNE_PROJECT": project, "NEPTUNE_CUSTOM_RUN_ID": run_id}
    if env.get("NEPTUNE_API_TOKEN"):
        out["NEPTUNE_API_TOKEN"] = env["NEPTUNE_API_TOKEN"]
    query = quote(f'(`sys/custom_run_id`:string = "{run_id}")')
    return JobTracking(env=out, links={"neptune": f"https://app.neptune.ai/{quote(project)}/runs/table?query={query}"})


def tensorboard(job: TrackedJob) -> JobTracking | None:
    """On when ``XCORE_TENSORBOARD_DIR`` is set (a directory the job can write: shared disk or
    ``gs://``): the job gets its own ``TENSORBOARD_LOGDIR`` =
    ``<dir>/xcore-<experiment>/<work unit>`` so one TensorBoard on ``<dir>/xcore-<experiment>``
    groups the sweep. The link is ``XCORE_TENSORBOARD_URL`` filtered to the run when set,
    else the directory."""
    env = job.launcher_env
    base = env.get("XCORE_TENSORBOARD_DIR")
    if not base:
        return None
    run = job.run_name.removeprefix(f"{job.run_group}/")
    logdir = f"{base.rstrip('/')}/{job.run_group}/{run}"
    url = env.get("XCORE_TENSORBOARD_URL")
    link = f"{url.rstrip('/')}/#scalars&regexInput={quote(job.run_group + '/' + run)}" if url else logdir
    return JobTracking(env={**_common(job), "TENSORBOARD_LOGDIR": logdir}, links={"tensorboard": link})


TRACKERS = (wandb, neptune, tensorboard)
SWITCHES = ("WANDB_PROJECT", "NEPTUNE_PROJECT", "XCORE_TENSORBOARD_DIR")
"""The settings that switch each of ``TRACKERS`` on (with none set, ``tracking`` adds nothing)."""


def enabled(env: Mapping[str, str]) -> bool:
    """Whether ``tracking`` can add anything for a job launched from ``env``."""
    return any(env.get(name) for name in SWITCHES)


def tracking(job: TrackedJob) -> JobTracking | None:
    env: dict[str, str] = {}
    links: dict[str, str] = {}
    for tracker in TRACKERS:
        answer = tracker(job)
        if answer is not None:
            env.update(answer.env)
            links.update(answer.links)
    return JobTracking(env=env, links=links) if env or links else None
