"""``xcore shell EXP/WU [--job NAME] [-- CMD...]``: a shell, or one command, inside a running job.

The job's backend says how to get in (``xcore_job_shell``: ``srun --overlap --pty`` over SSH,
``docker exec``, the job's own environment for a local process); this command checks that
the job runs, then replaces itself with that program so the terminal belongs to it (its
exit status is the command's).
"""

from __future__ import annotations

import argparse
import os
import sys

from xcore.cli.tables import printable
from xcore.cli.targets import parse_target
from xcore.errors import NotFoundError, XcoreError
from xcore.model.status import Status
from xcore.store.records import JobRecord, unreadable
from xcore.workspace import current


def shell(args: argparse.Namespace) -> int:
    experiment_id, unit_id = parse_target(args.target)
    if unit_id is None:
        raise XcoreError(f"Name a work unit: xcore shell {experiment_id}/WU (see `xcore show {experiment_id}`).")
    workspace = current()
    store = workspace.store
    units = store.work_units(experiment_id, [unit_id])
    if not units:
        store.get_experiment(experiment_id)
        raise NotFoundError(f"Experiment {experiment_id} has no work unit {unit_id}.")
    job = _one_job(units[0].jobs, args.target, args.job)
    where = f"{args.target}" + (f" job {printable(job.name)}" if len(units[0].jobs) > 1 else "")
    if job.handle is None:
        raise XcoreError(f"{where} was never launched ({printable(job.message or job.status.value)}): "
                         "there is no job to open a shell in.")
    host = workspace.host
    if not job.status.is_terminal:
        from xcore.runtime import tracking

        tracking.refresh_jobs(store, host, [job])  # updates the record in place
    if job.status.is_terminal:
        said = f": {printable(job.message)}" if job.message else ""
        raise XcoreError(f"{where} has ended ({job.status.value}{said}); a shell needs a running job. "
                         f"Its output: xcore logs {args.target}.")
    if job.status is not Status.RUNNING:
        said = f": {printable(job.message)}" if job.message else ""
        raise XcoreError(f"{where} is {job.status.value}{said}; a shell needs it running: try again once "
                         f"`xcore show {experiment_id}` says RUNNING.")
    try:
        handle = host.serializer.load(job.handle)
    except XcoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - a stored handle this version cannot rebuild
        raise XcoreError(f"Cannot open a shell in {where}: {unreadable(exc)}") from None
    command = list(args.shell_command) if args.shell_command else None
    plan = host.job_shell(job.handle_kind or "", handle, command)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        if plan.cwd:
            os.chdir(plan.cwd)
        os.execvpe(plan.argv[0], list(plan.argv), dict(plan.env) if plan.env is not None else os.environ)
    except OSError as exc:
        raise XcoreError(f"Cannot run {plan.argv[0]!r} to open a shell in {where}: {exc.strerror or exc}.") from None
    return 0  # not reached: exec replaced this process


def _one_job(jobs: list[JobRecord], target: str, name: str | None) -> JobRecord:
    names = ", ".join(printable(j.name) for j in jobs)
    if name is not None:
        found = [j for j in jobs if j.name == name]
        if not found:
            raise NotFoundError(f"Work unit {target} has no job {name!r}; jobs: {names}.")
        return found[0]
    if len(jobs) != 1:
        raise XcoreError(f"Work unit {target} has {len(jobs)} jobs ({names}): pick one with --job NAME.")
    return jobs[0]
