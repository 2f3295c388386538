"""What the core hands to execution hooks and what it gets back.

Every field below is part of the plugin contract (``xcore.plugin.PLUGIN_API_VERSION``):
the core fills requests and contexts exactly as documented, and reads from a handle only
the fields ``JobHandle`` declares.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from xcore.model import datamodel
from xcore.model.job_blocks import Executable, Executor
from xcore.model.retry import Retry

if TYPE_CHECKING:
    from xcore.model.dependencies import Dependency
    from xcore.progress import Progress


@datamodel.define
class JobHandle:
    """A backend's reference to one launched job, enough to find it again from a new process.

    Subclasses are attrs classes registered under a kind; they are stored as JSON, so every
    field must be JSON-friendly (str, int, float, bool, None, lists and dicts of those).

    The core reads exactly two fields, both keyword-only with defaults so subclasses may
    declare positional fields of their own (or redeclare these two):

    - ``log_path``: where the job's output is, as text a user can look up (a local path, a
      path on a cluster, a URL). Shown by ``xcore show --json``; None when there is no file.
    - ``error``: set (non-empty) when this job could not be started although its batch was
      submitted. The core then records the job as FAILED with the message
      ``failed to launch: <error>``. Prefer returning ``LaunchFailure`` from ``xcore_launch``.
    """

    log_path: str | None = attrs.field(default=None, kw_only=True)
    error: str | None = attrs.field(default=None, kw_only=True)


@datamodel.frozen
class LaunchFailure:
    """What ``xcore_launch`` returns, in a request's place, for a job that was not submitted
    while others of the same batch were.

    The core records that job as FAILED with the message ``failed to launch: <reason>``,
    keeps no handle for it, and fails its work unit's launch future (``await
    experiment.add(...)`` raises ``ExperimentUnitError``) like a batch that failed as a whole.
    ``reason`` should say what to fix (``"image 'foo' not found: push it first"``).
    """

    reason: str


def launch_failure_message(reason: str) -> str:
    """The status message a job gets when it failed to launch (one wording for every backend)."""
    return f"failed to launch: {reason}"


@datamodel.frozen
class LaunchRequest:
    """One job to submit.

    - ``job_id``: the job's id in the metadata store (unique in the store, stable forever).
    - ``experiment_id``, ``work_unit_id``: its experiment and work unit (ids from 1).
    - ``job_name``: its name inside the work unit (``"train"`` in ``JobGroup(train=...)``;
      the work unit's single job is named ``"job"``).
    - ``executable``: what packaging returned (your own ``Executable`` subclass).
    - ``executor``: the executor the job names (your own ``Executor`` subclass).
    - ``args``: the final argv strings, in order, after the executable's, job's and
      ``experiment.add`` args were merged. Pass them as argv entries, byte for byte: never
      join them into a shell line (they may hold quotes, ``$``, backticks, newlines, unicode
      and empty strings).
    - ``env``: the job's own environment variables only (the executable's ``env_vars``, then the
      job's, then ``experiment.add``'s), unredacted, names already validated. It does *not*
      contain the launcher's environment: whether a job inherits it is the backend's
      documented choice (xlocal processes inherit it, containers and clusters do not).
    - ``depends_on``: the jobs this one must wait for (``xcore.model.dependencies.Dependency``),
      given only to a backend whose ``native_dependencies`` is True; empty otherwise.
    - ``retry``: the job's resolved retry policy (the job's, else its executor's, else
      ``xcore.model.retry.DEFAULT_RETRY``). A backend that can retry by itself applies it;
      one that cannot reports ``JobState.failure`` and the core relaunches (see
      ``docs/long-runs.md``). None only in requests built by hand (read it as the default).
    - ``attempt``: the attempt number of this submission (1 for a first launch; a relaunch or
      ``xcore retry`` gives N+1). Export ``XCORE_ATTEMPT`` as this plus your own restarts, and
      ``XCORE_CHECKPOINT_DIR`` (``xcore.plugin.checkpoint_dir``) to the program.
    """

    job_id: int
    experiment_id: int
    work_unit_id: int
    job_name: str
    executable: Executable
    executor: Executor
    args: list[str]
    env: dict[str, str]
    depends_on: tuple[Dependency, ...] = ()
    retry: Retry | None = None
    attempt: int = 1

    @property
    def full_name(self) -> str:
        """Unique across the store: ``<experiment>_<work unit>_<job>``."""
        return f"{self.experiment_id}_{self.work_unit_id}_{self.job_name}"


@datamodel.frozen
class PackagingContext:
    """Where packaging may keep caches, and how it reports progress.

    - ``cache_dir``: ``$XCORE_HOME/cache``, shared by every plugin: use a subdirectory named
      after your plugin. It may be deleted at any time; never keep state there.
    - ``progress``: report long steps with ``progress.update(task, done, total, detail)`` and
      lasting lines with ``progress.message(text)``; it is silent under ``XCORE_QUIET=1``.
    """

    cache_dir: Path
    progress: Progress


@datamodel.frozen
class LaunchContext:
    """Where a backend may keep state, and how it reports progress.

    - ``state_dir``: ``$XCORE_HOME/plugins/<your plugin>``, private to your plugin and kept
      across processes (status, cancel and logs may need what launch wrote there).
    - ``progress``: as in ``PackagingContext``.
    - ``experiment_title``: the experiment's title, for naming jobs on the backend.
    """

    state_dir: Path
    progress: Progress
    experiment_title: str = ""
