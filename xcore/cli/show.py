"""``xcore show``: one experiment's work units, as a table or as JSON.

Read through the session's workspace as plain rows (``MetadataStore.unit_rows``) rendered as the
one read model (``xcore.workspace.views``), not as a record object per job, and the JSON written
one batch of work units at a time rather than as one string: at 10,000 jobs the records and the
whole text were most of the time and memory (issue 14). Unfinished jobs are asked for
their state first (``refresh_jobs``, which records what changed); the plugins load only then,
or when a finished job's results are still to be read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from xcore.cli.output import json_default
from xcore.cli.tables import format_duration, format_time, printable, render_table
from xcore.cli.targets import parse_target
from xcore.errors import NotFoundError, XcoreError
from xcore.model.status import Status
from xcore.model.usage import Meter, Usage, configured_prices, total
from xcore.runtime import collector
from xcore.store.records import JobRecord
from xcore.workspace import Workspace, current
from xcore.workspace.views import ExperimentView, UnitView, add_attempts, job_duration, unit_views

EXIT_OK = 0
_BATCH = 500  # work units per piece of JSON text: small pieces, few encoder calls
_REFRESHED = ("status", "message", "exit_code", "started_at", "ended_at")


def show(args: argparse.Namespace) -> int:
    """Without the cyclic collector: the rows, views and JSON pieces are some 200,000 containers
    that live until the output is written and hold no cycle, and the collector walked them again
    at every threshold (about a tenth of ``show --json``'s CPU at 10,000 jobs, issue 14). They are
    freed by reference counting when ``_show`` returns, before collection resumes; plugin code
    (asking backends, reading logs) runs with the collector on."""
    with collector.paused() as was_on:
        return _show(args, was_on)


def _show(args: argparse.Namespace, collecting: bool) -> int:
    experiment_id, unit_id = parse_target(args.experiment)
    group_by = getattr(args, "group_by", None)
    if group_by is not None:
        from xcore.workspace.groups import parse_names

        group_by = parse_names(group_by)  # a malformed option is an error before any backend is asked
    where = " ".join(getattr(args, "where", None) or ()) or None
    columns = None
    if getattr(args, "columns", None) is not None:  # imported only then: a plain show stays as quick
        from xcore.workspace.export import parse_columns

        columns = parse_columns(args.columns)
    if where is not None:
        from xcore.model.filters import parse

        parse(where)  # a malformed filter too
    prices = configured_prices()  # a bad price table is an error before any backend is asked
    workspace = current()
    store = workspace.settled_store()
    record = store.get_experiment(experiment_id)  # an unknown experiment is an error before any backend is asked
    wanted = None if unit_id is None else [unit_id]
    units = store.unit_rows(experiment_id, wanted)
    if unit_id is not None and not units:
        raise NotFoundError(
            f"Experiment {experiment_id} has no work unit {unit_id} (see `xcore show {experiment_id}`).")
    refreshed = _refresh(workspace, [job for unit in units for job in unit["jobs"]], collecting)
    if refreshed:
        for unit in units:
            for job in unit["jobs"]:
                fresh = refreshed.get(job["id"])
                if fresh is not None:  # what the backend said, also when it could not be recorded (UNKNOWN)
                    for field in _REFRESHED:
                        job[field] = getattr(fresh, field)
                    job["status"] = fresh.status.value
    from xcore.runtime import results as results_module

    pending = store.results_pending(experiment_id)
    if pending and (unit_id is not None or _may_read(workspace, units, pending)):  # else no plugin needed
        with collector.resumed(collecting):
            results_module.collect(store, workspace.host, experiment_id, rows=units if unit_id is None else None,
                                   pending=pending)
        if unit_id is not None:  # the error lines of failed jobs just read
            messages = {job["id"]: job["message"] for unit in store.unit_rows(experiment_id, wanted)
                        for job in unit["jobs"]}
            for unit in units:
                for job in unit["jobs"]:
                    if job["status"] == Status.FAILED.value:
                        job["message"] = messages.get(job["id"], job["message"])
    if refreshed:  # states were recorded: the experiment's counts changed
        record = store.get_experiment(experiment_id)
    add_attempts(units, store.job_attempts(experiment_id, wanted))
    results, links = store.results(experiment_id, wanted), store.links(experiment_id, wanted)
    now = time.time()
    views = unit_views(units, results, links, now, store.dependencies(experiment_id, wanted))
    del units
    experiment = ExperimentView(record)
    meter = Meter(now, prices)
    usages = {view.id: meter.jobs(view.jobs) for view in views}
    if where is not None:
        from xcore.workspace.where import filter_units

        unfiltered = len(views)
        views = filter_units(views, where)
    if group_by is not None:
        _show_groups(experiment, views, group_by, args)
        return EXIT_OK
    views = _sorted_units(views, getattr(args, "sort", None), getattr(args, "top", None))
    if getattr(args, "csv", False):
        from xcore.workspace.export import unit_csv

        sys.stdout.write(unit_csv(views, columns))
        return EXIT_OK
    trouble = store.notification_trouble(experiment_id) if unit_id is None else None
    if args.json:
        head = experiment.to_json()
        if where is not None:
            head["where"] = where
        if unit_id is None:
            head["usage"] = total(usages.values()).to_json()
            head["notifications"] = trouble
        _write_json(head, views, now, usages)
        return EXIT_OK
    print(f"Experiment {record.id}: {printable(record.title)}")
    print(f"  status   {record.status.value} ({experiment.summary})")
    if record.unreadable:
        print(f"  record   {printable(record.unreadable)}")
    print(f"  created  {format_time(record.created_at)} by {printable(record.user)}@{printable(record.host)}")
    if record.script_path:
        print(f"  script   {printable(record.script_path)} (sha256 {str(record.script_sha256)[:12]})")
    if record.git_commit:
        print(f"  git      {printable(record.git_commit[:12])}{' (dirty)' if record.git_dirty else ''}")
    if record.tags:
        print(f"  tags     {printable(', '.join(record.tags))}")
    if record.notes:
        print(f"  notes    {printable(record.notes)}")
    if record.launch_status == "LAUNCH_FAILED":
        print(f"  launch   FAILED: {printable(record.launch_error)}")
    if where is not None:
        print(f"  filter   {printable(where)}: {len(views)} of {unfiltered} work units")
    used = total(usages.values())
    if used != Usage():
        currency = prices.currency if prices is not None else ""
        print(f"  usage    {used.describe(currency)}{'' if unit_id is None else f' (work unit {unit_id})'}")
    usage_column = bool(used.gpu_hours or used.tpu_hours or used.cost is not None)
    if trouble and (line := _trouble_line(experiment_id, trouble)):
        print(f"  notify   {line}")
    print()
    if columns is not None:
        _print_columns(views, columns)
        return EXIT_OK
    rows: list[tuple[object, ...]] = []
    names = results_module.result_names(results)
    completed = Status.COMPLETED.value
    retried = any("attempts" in job for view in views for job in view.jobs)  # then an ATTEMPTS column
    for view in views:
        values = tuple(_format_result(view.results.get(n)) for n in names)
        arguments = _format_args(view.args)
        jobs = view.jobs
        usage_cells: tuple[str, ...] = ()
        if usage_column:
            usage_cells = (usages[view.id].describe(),)
        if not jobs:
            name = f"{view.id} (aux)" if view.role == "auxiliary" else f"{view.id}"
            rows.append((name, view.status.value, "-", "-", *usage_cells, *values, "", arguments,
                         *(("-",) if retried else ())))
            continue
        for job in jobs:
            name = f"{view.id}" if len(jobs) <= 1 else f"{view.id}/{job['name']}"
            if view.role == "auxiliary":
                name += " (aux)"
            exit_code = job["exit_code"]
            rows.append((name, job["status"], "-" if exit_code is None else exit_code,
                         format_duration(job_duration(job, now)),
                         *(() if not usage_cells else (meter.job(job).describe(),)), *values,
                         job["message"] if job["status"] != completed else "", arguments,
                         *((_format_attempts(job),) if retried else ())))
    if rows:
        print(render_table(["WU", "STATUS", "EXIT", "DURATION", *(["USAGE"] if usage_column else []),
                            *(n.upper() for n in names), "MESSAGE", "ARGS", *(("ATTEMPTS",) if retried else ())],
                           rows))
    else:
        print("(no work units)")
    link_rows = [(view.id, name, url) for view in views for name, url in view.links.items()]
    if link_rows:
        print()
        print(render_table(["WU", "TRACKER", "LINK"], link_rows))
    depends = [(view.id, ", ".join(e.on_name for e in view.depends_on), view.depends_on[0].when)
               for view in views if view.depends_on]
    if depends:
        print()
        print(render_table(["WU", "DEPENDS ON", "WHEN"], depends))
    return EXIT_OK


def _trouble_line(experiment_id: int, trouble: dict[str, int]) -> str:
    """Deliveries of the experiment's notifications that failed or are being retried, and
    where to read why; empty when there are none."""
    parts = []
    if failed := trouble.get("failed", 0):
        parts.append(f"{failed} failed deliver{'y' if failed == 1 else 'ies'}")
    if retrying := trouble.get("retrying", 0):
        parts.append(f"{retrying} being retried")
    return f"{', '.join(parts)} (xcore notifications {experiment_id})" if parts else ""


def _show_groups(experiment: ExperimentView, views: list[UnitView], names: list[str],
                 args: argparse.Namespace) -> None:
    """``--group-by``: one row (or JSON object) per group of the named arguments' values."""
    from xcore.runtime.results import result_names
    from xcore.workspace.groups import group_units, sort_groups

    top = getattr(args, "top", None)
    if top is not None and top < 1:
        raise XcoreError(f"--top must be 1 or more, got {top}.")
    groups = sort_groups(group_units(views, names), getattr(args, "sort", None))[:top]
    results = result_names({view.id: view.results for view in views})
    if getattr(args, "csv", False):
        from xcore.workspace.export import group_csv, parse_columns

        sys.stdout.write(group_csv(groups, names, results, parse_columns(getattr(args, "columns", None))))
        return
    if args.json:
        head = experiment.to_json()
        head["group_by"] = names
        if getattr(args, "where", None):
            head["where"] = " ".join(args.where)
        head["groups"] = [group.to_json(results) for group in groups]
        indent = 2 if sys.stdout.isatty() else None
        sys.stdout.write(json.dumps(head, indent=indent, default=json_default, ensure_ascii=False) + "\n")
        return
    record = experiment.record
    print(f"Experiment {record.id}: {printable(record.title)}")
    print(f"  status   {record.status.value} ({experiment.summary})")
    if getattr(args, "where", None):
        print(f"  filter   {printable(' '.join(args.where))}: {len(views)} work units")
    print(f"  grouped  by {printable(', '.join(names))}: {len(groups)} groups")
    print()
    headers = [*(n.upper() for n in names), "COUNT", "COMPLETED", "FAILED"]
    headers += [f"{n.upper()} {stat}" for n in results for stat in ("MEAN", "STD", "MIN", "MAX")]
    rows = []
    for group in groups:
        cells: list[object] = [_format_arg(group.args[n]) for n in names]
        cells += [group.count, group.completed, group.failed]
        for name in results:
            stats = group.stats(name) or {}
            cells += [_format_result(stats.get(stat)) for stat in ("mean", "std", "min", "max")]
        rows.append(cells)
    print(render_table(headers, rows) if rows else "(no work units)")


def _print_columns(views: list[UnitView], columns: list[str]) -> None:
    """``--columns``: one row per work unit, its id then the chosen columns."""
    from xcore.model.filters import MISSING
    from xcore.workspace.export import unit_columns
    from xcore.workspace.where import unit_value

    columns = unit_columns(views, columns)

    def text(value: Any) -> str:
        if value is MISSING or value is None:
            return "-"
        if isinstance(value, list):
            return ";".join(map(str, value))
        if isinstance(value, float):
            return _format_result(value)
        return value if isinstance(value, str) else _format_arg(value)

    def cell(view: UnitView, name: str) -> str:
        if name == "duration" and "duration" not in view.named_args and "duration" not in view.results:
            return format_duration(view.duration)
        return text(unit_value(view, name))

    rows = [[view.id, *(cell(view, name) for name in columns)] for view in views]
    print(render_table(["WU", *(c.upper() for c in columns)], rows) if rows else "(no work units)")


def _format_arg(value: Any) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, (int, float)) else json.dumps(value, ensure_ascii=False)


def _refresh(workspace: Workspace, jobs: list[dict[str, Any]], collecting: bool) -> dict[int, JobRecord]:
    """The unfinished jobs among ``jobs`` (UNKNOWN too: asking again may fix it) with the state
    their backends report now, by id; nothing to ask, no plugin loaded."""
    terminal = {s.value for s in Status if s.is_terminal}
    unfinished = [JobRecord(**{**job, "status": Status(job["status"])}) for job in jobs
                  if job["status"] not in terminal and job["handle_kind"] and job["handle"] is not None]
    if not unfinished:
        return {}
    with collector.resumed(collecting):
        from xcore.runtime import tracking

        return {job.id: job for job in tracking.refresh_jobs(workspace.store, workspace.host, unfinished)}


def _may_read(workspace: Workspace, units: list[dict[str, Any]], pending: list[int]) -> bool:
    """Whether some plugin may read the logs of the ``pending`` jobs among ``units``: not when
    no installed plugin declares their handles' kinds (a sweep of a backend uninstalled since),
    which the metadata tells without building the plugin host (pluggy, every kind: 10% of
    ``show`` at 10,000 jobs). A host already built (tests, a launch) decides itself."""
    if workspace.built_host() is not None:
        return True
    from xcore.hooks.entry_points import may_provide

    wanted = set(pending)
    kinds: set[str] = set()
    for unit in units:
        for job in unit["jobs"]:
            if job["id"] in wanted:
                kind = job["handle"].get("kind") if isinstance(job["handle"], dict) else None
                if not isinstance(kind, str):
                    return True  # collect reads these, kind or not
                kinds.add(kind)
    return may_provide(kinds)


def _sorted_units(units: list[UnitView], sort: str | None, top: int | None) -> list[UnitView]:
    """``--sort NAME`` (ascending) or ``-NAME`` (descending) by a result, an argument, or
    ``id``/``status``/``duration``; units without the value come last. ``--top N`` keeps N."""
    if top is not None and top < 1:
        raise XcoreError(f"--top must be 1 or more, got {top}.")
    if sort:
        descending = sort.startswith("-")
        key = sort.lstrip("-+")
        known = {n for u in units for n in u.results}
        known |= {k for u in units if isinstance(u.args, dict) for k in u.args} | {"id", "status", "duration"}
        if key not in known:
            raise XcoreError(f"Cannot sort by {key!r}: use a result, an argument or id/status/duration "
                             f"({', '.join(sorted(known))}).")

        def value(unit: UnitView) -> Any:
            if key in unit.results:
                return unit.results[key]
            if isinstance(unit.args, dict) and key in unit.args:
                return unit.args[key]
            return {"id": unit.id, "status": unit.status.value, "duration": unit.duration}.get(key)

        present = [u for u in units if value(u) is not None]
        missing = [u for u in units if value(u) is None]
        try:
            present.sort(key=value, reverse=descending)
        except TypeError:  # mixed types (an argument that is a number here, a string there)
            present.sort(key=lambda u: str(value(u)), reverse=descending)
        units = present + missing
    return units[:top] if top is not None else units


def _write_json(head: dict[str, Any], units: list[UnitView], now: float, usages: dict[int, Usage]) -> None:
    """The experiment as one JSON document (the same text ``json.dumps`` of the whole would
    give), written in pieces. A sweep's jobs share one executor and one executable: each is
    written once, in top-level ``executors``/``executables`` tables keyed by id, and a job names
    it (``executor_id``, ``executable_id``) instead of repeating it."""
    indent = 2 if sys.stdout.isatty() else None  # the C encoder is only used without indent
    tables = _SpecTables()
    pieces = _units_json(units, tables, now, usages)
    if indent is not None:  # a terminal: one indented document (small enough to read anyway)
        head["work_units"] = pieces
        head["executors"], head["executables"] = tables.executors, tables.executables
        sys.stdout.write(json.dumps(head, indent=indent, default=json_default, ensure_ascii=False))
        sys.stdout.write("\n")
        return
    # no cycle check: the values come from decoded JSON and plain rows, which cannot hold a cycle
    encode = json.JSONEncoder(ensure_ascii=False, check_circular=False, default=json_default).encode
    write = sys.stdout.write
    opening = encode(head)
    write(opening[:-1] + (', "work_units": [' if head else '"work_units": ['))
    for start in range(0, len(pieces), _BATCH):
        if start:
            write(", ")
        write(encode(pieces[start : start + _BATCH])[1:-1])
    write(f'], "executors": {encode(tables.executors)}, "executables": {encode(tables.executables)}}}\n')


class _SpecTables:
    """Executors and executables by id: one entry per distinct content (any key order)."""

    def __init__(self) -> None:
        self.executors: dict[str, Any] = {}
        self.executables: dict[str, Any] = {}
        self._by_content: tuple[dict[str, str], dict[str, str]] = ({}, {})
        self._by_object: tuple[dict[int, tuple[Any, str]], dict[int, tuple[Any, str]]] = ({}, {})

    def ref(self, value: Any, executable: bool) -> str:
        by_object = self._by_object[executable]
        seen = by_object.get(id(value))
        if seen is not None and seen[0] is value:  # the store shares one object per distinct stored text
            return seen[1]
        key = json.dumps(value, sort_keys=True, default=str)
        by_content = self._by_content[executable]
        ref = by_content.get(key)
        if ref is None:
            table = self.executables if executable else self.executors
            ref = by_content[key] = str(len(by_content) + 1)
            table[ref] = value
        by_object[id(value)] = (value, ref)  # holds the value: its id is not reused meanwhile
        return ref


def _units_json(units: list[UnitView], tables: _SpecTables, now: float,
                usages: dict[int, Usage]) -> list[dict[str, Any]]:
    """Each unit as its JSON object, in one loop (10,000 calls were a visible share). A job's
    executor and executable become references; a sweep's jobs share the very same objects, so
    the last reference is reused when the object is (no lookup per job)."""
    ref = tables.ref
    executor: Any = None
    executable: Any = None
    executor_id = executable_id = ""
    pieces = []
    for unit in units:
        jobs = unit.jobs
        single = len(jobs) == 1
        for job in jobs:  # the row dicts themselves, not copies: nothing else reads them after this
            value = job.pop("executor")
            if value is not executor or not executor_id:
                executor, executor_id = value, ref(value, False)
            value = job.pop("executable")
            if value is not executable or not executable_id:
                executable, executable_id = value, ref(value, True)
            # one job: the unit's duration is the job's, from the same times
            job["duration"] = unit.duration if single else job_duration(job, now)
            job["executor_id"] = executor_id
            job["executable_id"] = executable_id
        unit_id = unit.id
        pieces.append({
            "id": unit_id, "role": unit.role, "args": unit.args, "identity": unit.identity,
            "status": unit.status.value, "exit_codes": unit.exit_codes, "duration": unit.duration,
            "started_at": unit.started_at, "ended_at": unit.ended_at, "jobs": jobs,
            "results": unit.results, "links": unit.links, "usage": usages[unit_id].to_json(),
        })
        if unit.depends_on:  # what it waits for (experiment.add(..., depends_on=..., when=...))
            pieces[-1]["depends_on"] = [edge.on_name for edge in unit.depends_on]
            pieces[-1]["depends_when"] = unit.depends_on[0].when
    return pieces


def _format_attempts(job: dict[str, Any]) -> str:
    """``3 (last: preempted)``: how many attempts the job had and its last failure class."""
    if "attempts" not in job:
        return "1"
    failure = job.get("failure")
    return f"{job['attempt']}" + (f" (last: {failure})" if failure else "")


def _format_result(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _format_args(args: Any) -> str:
    if isinstance(args, dict):
        return " ".join([f"{k}={v}" if isinstance(v, (int, float)) else f"{k}={json.dumps(v, ensure_ascii=False)}"
                         for k, v in args.items()])
    return json.dumps(args, ensure_ascii=False) if args else ""
