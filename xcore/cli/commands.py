"""What each ``xcore`` subcommand does."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from xcore.cli.output import print_json
from xcore.cli.tables import format_time, plural, printable, render_table
from xcore.cli.targets import parse_target
from xcore.errors import NotFoundError, XcoreError
from xcore.model.status import Status, cancelled_by_launch
from xcore.progress import Progress
from xcore.store import MetadataStore
from xcore.store.records import JobRecord, unreadable
from xcore.workspace import current
from xcore.workspace.views import ExperimentView

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 124
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


# The plugin host (the workspace's), the launcher and the trackers load on first need, so a
# command that needs no plugin (e.g. `xcore list` on the built-in store) imports none of them.


def refresh_jobs(*args: Any, **kwargs: Any) -> list[JobRecord]:
    from xcore.runtime import tracking

    return tracking.refresh_jobs(*args, **kwargs)


def wait_for(*args: Any, **kwargs: Any) -> list[JobRecord]:
    from xcore.runtime import tracking

    return tracking.wait_for(*args, **kwargs)


def _store() -> MetadataStore:
    """The session's store, with the work of killed launchers adopted or marked failed."""
    return current().settled_store()


def _refresh_experiments(store: MetadataStore, experiment_ids: list[int]) -> None:
    if experiment_ids:
        refresh_jobs(store, current().host, store.active_jobs(experiment_ids))


# -- launch ----------------------------------------------------------------------------------


def launch(args: argparse.Namespace) -> int:
    import runpy
    import signal

    from xcore.cli.main import collect_less_often
    from xcore.launch import registry

    script = Path(args.script)
    if not script.is_file():
        raise XcoreError(f"Launch script {script} does not exist.")
    script = script.resolve()
    _refuse_stdlib_name(script)
    script_args = list(args.script_args)
    registry.set_launch_script(script)
    before = len(registry.created_experiment_ids)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *script_args]
    sys.path.insert(0, str(script.parent))
    error: BaseException | None = None
    previous_term = _terminate_as_interrupt()
    collect_less_often()
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = exc
    except BaseException as exc:  # reported below; what was launched stays recorded
        error = exc
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        registry.set_launch_script(None)
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
    created = registry.created_experiment_ids[before:]
    store = _store()
    if error is not None:
        _mark_unfinished_failed(store, created, error)
        _report_launch_error(script, error, created, store, args.traceback)
        if isinstance(error, KeyboardInterrupt):
            from xcore.runtime.launcher import Terminated

            return EXIT_TERMINATED if isinstance(error, Terminated) else EXIT_INTERRUPTED
        return EXIT_FAILED
    for experiment_id in created:
        record = store.get_experiment(experiment_id)
        print(f"experiment {record.id} {printable(repr(record.title))}: {plural(record.work_unit_count, 'work unit')} "
              f"launched (xcore show {record.id})", file=sys.stderr)
    _skip_last_collection()
    if args.wait and created:
        codes = [_wait_experiment(store, experiment_id, None, as_json=False, just_launched=True)
                 for experiment_id in created]
        return max(codes)
    return EXIT_OK


def _skip_last_collection() -> None:
    """The launch is recorded; this process only exits (or waits) now. Freezing what exists
    spares the interpreter's last garbage collection a walk over the sweep's objects (0.05 to
    0.1 s at 10,000 work units, issue 14); they go with the process. Objects made later (while
    ``--wait`` polls) are still collected."""
    from xcore.runtime import collector

    collector.freeze_survivors()


def _refuse_stdlib_name(script: Path) -> None:
    from xcore.paths import stdlib_shadowing

    problem = stdlib_shadowing(script)
    if problem:
        raise XcoreError(problem)


def _mark_unfinished_failed(store: MetadataStore, created: list[int], error: BaseException) -> None:
    """An experiment the script never closed (no ``with`` block) would read LAUNCHING forever."""
    for experiment_id in created:
        if store.get_experiment(experiment_id).launch_status == "LAUNCHING":
            store.update_experiment(experiment_id, launch_status="LAUNCH_FAILED",
                                    launch_error=f"the launch script failed: {_one_line(error)}")


def _one_line(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"it exited with status {error.code}"
    return str(error) if isinstance(error, XcoreError) else f"{type(error).__name__}: {error}"


def _terminate_as_interrupt() -> Any:
    """SIGTERM stops a launch like Ctrl-C: queued jobs are not submitted, submitted ones are recorded."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return None

    from xcore.runtime.launcher import Terminated

    def handler(signum: int, frame: Any) -> None:
        raise Terminated("terminated")

    return signal.signal(signal.SIGTERM, handler)


def _report_launch_error(script: Path, error: BaseException, created: list[int], store: MetadataStore,
                         full: bool) -> None:
    import traceback

    from xcore.runtime.launcher import Terminated

    if isinstance(error, SystemExit):
        detail = f"it exited with status {error.code}"
    elif isinstance(error, KeyboardInterrupt):
        detail = "terminated (SIGTERM)" if isinstance(error, Terminated) else "interrupted"
    elif isinstance(error, XcoreError):
        detail = str(error)
    else:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(script)]
        where = f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
        detail = f"{type(error).__name__}: {error}{where}"
    kept = ""
    if created:
        parts = []
        for experiment_id in created:
            record = store.get_experiment(experiment_id)
            parts.append(f"experiment {record.id} ({plural(record.work_unit_count, 'work unit')})")
        kept = (f" What it launched before failing stays recorded: {', '.join(parts)}; "
                f"see `xcore show {created[-1]}`, or stop it with `xcore cancel {created[-1]}`.")
    print(f"error: launch script {script} failed: {printable(detail).rstrip('.')}.{kept}", file=sys.stderr)
    if full:
        traceback.print_exception(error)
    elif not isinstance(error, (XcoreError, SystemExit, KeyboardInterrupt)):
        print("(run with --traceback for the full traceback)", file=sys.stderr)


# -- list and show ---------------------------------------------------------------------------


def list_(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise XcoreError(f"--limit must be 0 (all) or more, got {args.limit}.")
    if args.status and args.status.upper() not in Status.__members__:
        raise XcoreError(f"Unknown status {args.status!r}; use one of {', '.join(Status.__members__)}.")
    store = _store()
    limit = None if args.limit == 0 else args.limit
    user = args.user
    if getattr(args, "mine", False):
        from xcore.launch.units import current_user  # the name experiments record as their launcher

        user = current_user()
    records = store.list_experiments(title=args.title, tag=args.tag, user=user, limit=None if args.status else limit)
    active = [r.id for r in records if r.has_active_units][:200]
    _refresh_experiments(store, active)
    if active or args.status:  # else the same query would read the same rows again
        records = store.list_experiments(status=args.status, title=args.title, tag=args.tag, user=user, limit=limit)
    if args.json:
        print_json(_with_usage(store, [ExperimentView(r).to_json() for r in records]))
        return EXIT_OK
    if not records:
        print("No experiments yet. Launch one with: xcore launch LAUNCH_SCRIPT.py", file=sys.stderr)
        return EXIT_OK
    rows = [(r.id, r.status.value, format_time(r.created_at), r.user, ",".join(r.tags), ExperimentView(r).summary,
             f"{r.title} ({r.unreadable})" if r.unreadable else r.title)
            for r in records]
    print(render_table(["ID", "STATUS", "CREATED", "USER", "TAGS", "WORK UNITS", "TITLE"], rows))
    return EXIT_OK


def _with_usage(store: MetadataStore, experiments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each experiment with its jobs' resource-hours and cost (``xcore.model.usage``)."""
    if not experiments:
        return experiments
    import time

    from xcore.model.usage import Meter, configured_prices
    from xcore.workspace.views import add_attempts

    meter = Meter(time.time(), configured_prices())
    for experiment in experiments:
        rows = store.unit_rows(experiment["id"])
        add_attempts(rows, store.job_attempts(experiment["id"]))  # every attempt's hours count
        experiment["usage"] = meter.jobs(job for row in rows for job in row["jobs"]).to_json()
    return experiments


def _job_json(job: JobRecord) -> dict[str, Any]:
    data = attrs.asdict(job, recurse=False)  # fields are JSON already: no deep copy per job
    data["status"] = job.status.value
    data["duration"] = job.duration
    return data


# -- wait, cancel, logs ----------------------------------------------------------------------


def wait(args: argparse.Namespace) -> int:
    experiment_id, unit_id = parse_target(args.experiment)
    return _wait_experiment(_store(), experiment_id, unit_id, as_json=args.json, timeout=args.timeout)


def _wait_experiment(store: MetadataStore, experiment_id: int, unit_id: int | None, *, as_json: bool,
                     timeout: float | None = None, just_launched: bool = False) -> int:
    """Wait for the experiment's (or one unit's) jobs to end and report them. Each poll reads
    only the stored statuses (no record) and asks the backends about the jobs still active,
    whose records and handles are read once (issue 14: a 2,000-job wait decoded every
    active record on every poll). ``just_launched``: the jobs were recorded a moment ago, so
    the first poll shows what the store says instead of asking the backends (nothing can
    have ended yet that the next poll, after the backend's wait for a change, misses)."""
    store.get_experiment(experiment_id)
    workspace = current()
    progress = Progress()

    rows = store.job_statuses(experiment_id, None if unit_id is None else [unit_id])
    if unit_id is not None and not rows:
        raise NotFoundError(
            f"Experiment {experiment_id} has no work unit {unit_id} (see `xcore show {experiment_id}`).")
    unit_of = {job_id: unit for unit, role, job_id, _ in rows if role == "work_unit" and job_id is not None}
    wanted = set(unit_of)
    terminal = {status.value for status in Status if status.is_terminal}
    still = {status.value for status in Status if status.is_active}  # what store.active_jobs reads
    finished: dict[int, JobRecord] = {}  # in the order of work_units, then in the order they ended
    ended_units = sorted({unit_of[job_id] for _, _, job_id, status in rows if job_id in unit_of and status in terminal})
    if ended_units:
        finished.update((j.id, j) for u in store.work_units(experiment_id, ended_units) if u.role == "work_unit"
                        for j in u.jobs if j.status.is_terminal)
    polled: dict[int, JobRecord] = {}  # the active jobs: id -> record, read once, updated in place by each poll
    handles: dict[int, Any] = {}  # job id -> its loaded handle, shared by the polls and the pauses
    unavailable: dict[int, str] = {}  # job id -> why its backend is out of reach now: still waiting for it
    ask_backends = not just_launched

    def fetch() -> list[JobRecord]:
        """Finished jobs are read once; each poll asks the backends only about the still active
        ones. A job that another process saw end in between is read back from the store, so the
        answer depends only on final states, not on who recorded them."""
        nonlocal ask_backends
        if polled:
            stored = {job_id: status for _, _, job_id, status in store.job_statuses(
                experiment_id, None if unit_id is None else [unit_id]) if job_id in wanted}
            for job_id in [i for i in polled if stored.get(i) not in still]:
                del polled[job_id]  # ended as another process saw it (or gone): read back below
            reread = any(job.handle is None for job in polled.values()) or any(
                status in still and job_id not in polled and job_id not in finished
                for job_id, status in stored.items())
        else:
            reread = True
        if reread:  # jobs not yet read, or read before they were launched: their records now
            polled.update((j.id, j) for j in store.active_jobs([experiment_id]) if j.id in wanted)
        if not ask_backends:  # the first poll of a launch that just recorded its jobs
            ask_backends = True
        else:
            for job in refresh_jobs(store, workspace.host, list(polled.values()), handles, unavailable):
                if job.status.is_terminal:
                    finished[job.id] = job
                    del polled[job.id]
        missing = wanted - finished.keys() - polled.keys()
        if missing:
            for unit in store.work_units(experiment_id, sorted({unit_of[job_id] for job_id in missing})):
                for job in unit.jobs:
                    # UNKNOWN (e.g. an unreadable record): polling cannot change it, so it counts as read
                    if job.id in missing and (job.status.is_terminal or job.status is Status.UNKNOWN):
                        finished[job.id] = job
        return list(finished.values()) + [j for j in polled.values() if not j.status.is_terminal]

    last: list[JobRecord] = []

    def warn_outage(out_of_reach: dict[int, str]) -> None:
        """A warning even under XCORE_QUIET: the wait goes on, but the user should know why."""
        from xcore.runtime.tracking import outage_line

        progress.clear()
        print(f"xcore wait: {outage_line(out_of_reach)}", file=sys.stderr)

    def report(jobs: list[JobRecord]) -> None:
        last[:] = jobs
        counts = Counter(j.status.value for j in jobs)
        done = sum(counts[s.value] for s in Status if s.is_terminal)
        progress.update(f"experiment {experiment_id}", done, len(jobs), _counts(jobs, total=False))

    try:
        jobs = wait_for(fetch, store, workspace.host, timeout=timeout, on_poll=report, refresh=False, handles=handles,
                        unavailable=unavailable, on_outage=warn_outage)
    except TimeoutError as exc:
        progress.clear()
        print(f"timeout: {exc}", file=sys.stderr)
        active = [j for j in last if not j.status.is_terminal]
        for job in active[:20]:  # why they still wait, e.g. a scheduler's pending reason
            message = f" {printable(job.message)}" if job.message else ""
            print(f"  {job.work_unit_id}/{printable(job.name)}: {job.status.value}{message}", file=sys.stderr)
        if len(active) > 20:
            print(f"  ... and {len(active) - 20} more", file=sys.stderr)
        return EXIT_TIMEOUT
    progress.clear()
    # Jobs whose launch the script itself cancelled (XManager ignores cancelled launches) are
    # listed in the counts, not as failures.
    failed = [j for j in jobs if j.status is not Status.COMPLETED and not cancelled_by_launch(j.status, j.message)]
    if len(jobs) < len(wanted):  # cannot happen by construction; never answer "all succeeded" on less
        raise XcoreError(f"experiment {experiment_id}: only {len(jobs)} of {len(wanted)} jobs could be read.")
    if as_json:
        print_json({"experiment": experiment_id, "ok": not failed, "jobs": [_job_json(j) for j in jobs]})
    else:
        print(f"experiment {experiment_id}: {_counts(jobs)}")
        for job in failed[:20]:
            message = f" {printable(job.message)}" if job.message else ""
            print(f"  {job.work_unit_id}/{printable(job.name)}: {job.status.value}{message}  "
                  f"(xcore logs {experiment_id}/{job.work_unit_id})")
        if len(failed) > 20:
            print(f"  ... and {len(failed) - 20} more")
    return EXIT_OK if not failed else EXIT_FAILED


def _counts(jobs: list[JobRecord], total: bool = True) -> str:
    """``3 jobs: 2 completed, 1 failed``; ``no jobs`` for none."""
    counts = Counter(j.status.value for j in jobs)
    if not counts:
        return "no jobs"
    parts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
    return f"{plural(len(jobs), 'job')}: {parts}" if total else parts


def cancel(args: argparse.Namespace) -> int:
    from xcore.runtime.tracking import cancel_jobs

    experiment_id, unit_id = parse_target(args.target)
    store = _store()
    store.get_experiment(experiment_id)
    if unit_id is not None and not store.unit_rows(experiment_id, [unit_id]):
        raise NotFoundError(f"Experiment {experiment_id} has no work unit {unit_id}.")
    # Recorded first: a launch still submitting reads it before and after each submission, so
    # what it has not submitted yet never runs, and what it submits meanwhile is cancelled.
    store.request_cancel(experiment_id, None if unit_id is None else [unit_id])
    # Read once, after the request. A whole experiment: its active jobs' light rows (no
    # executor, executable, args, env), what polling reads; a 100,000-task sweep's full records
    # took seconds to build and were read twice (issue 31).
    if unit_id is None:
        jobs = store.active_jobs([experiment_id])
    else:
        jobs = [j for u in store.work_units(experiment_id, [unit_id]) for j in u.jobs]
    count = cancel_jobs(store, current().host, jobs)
    what = f"experiment {experiment_id}" if unit_id is None else f"work unit {experiment_id}/{unit_id}"
    print(f"cancelled {plural(count, 'job')} of {what}")
    if unsubmitted := sum(j.status is Status.LAUNCHING and j.handle is None for j in jobs):
        print(f"{plural(unsubmitted, 'job')} not submitted yet: the launch records them cancelled and submits "
              "nothing more of it")
    return EXIT_OK


def logs(args: argparse.Namespace) -> int:
    experiment_id, unit_id = parse_target(args.target)
    if unit_id is None:
        raise XcoreError(f"Name a work unit: xcore logs {experiment_id}/WU (see `xcore show {experiment_id}`).")
    store = _store()
    units = store.work_units(experiment_id, [unit_id])
    if not units:
        store.get_experiment(experiment_id)
        raise NotFoundError(f"Experiment {experiment_id} has no work unit {unit_id}.")
    jobs = [j for j in units[0].jobs if args.job in (None, j.name)]
    if not jobs:
        names = ", ".join(j.name for j in units[0].jobs)
        raise NotFoundError(f"Work unit {args.target} has no job {args.job!r}; jobs: {names}.")
    host = current().host
    attempt = getattr(args, "attempt", None)
    if attempt is not None:
        from xcore.workspace.attempts import attempt_of

        jobs = [attempt_of(store, experiment_id, unit_id, job, attempt) for job in jobs]
    for job in jobs:
        if len(jobs) > 1:
            print(f"==> {printable(job.name)} <==", flush=True)
        if job.handle is None:
            print(f"(job {printable(job.name)} was never launched: {printable(job.message or job.status.value)})",
                  file=sys.stderr)
            continue
        try:
            handle = host.serializer.load(job.handle)
        except XcoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - a stored handle this version cannot rebuild
            raise XcoreError(
                f"Cannot read the logs of {experiment_id}/{unit_id} job {job.name}: {unreadable(exc)}") from None
        for chunk in host.job_logs(job.handle_kind or "", handle, args.follow):
            sys.stdout.write(chunk)
            sys.stdout.flush()
    return EXIT_OK


def plugins(args: argparse.Namespace) -> int:
    infos = current().host.plugins()
    if args.json:
        print_json([attrs.asdict(i) for i in infos])
        return EXIT_OK
    rows = [(i.name, i.distribution or "(built in)", i.version or "", i.status,
             ", ".join(i.kinds) if i.status == "loaded" else (i.error or "").splitlines()[0] if i.error else "")
            for i in infos]
    print(render_table(["NAME", "DISTRIBUTION", "VERSION", "STATUS", "KINDS / ERROR"], rows))
    return EXIT_OK
