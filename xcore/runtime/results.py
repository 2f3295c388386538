"""Trial results: how a program reports scalars without depending on xcore.

The convention, the same on every backend: the program prints a line

    XCORE_RESULT {"loss": 0.0123, "accuracy": 0.97}

to its standard output or error (a JSON object of names to numbers, on one line, the marker
at the start of the line). It may print such lines any number of times; for each name the
last value wins. xcore reads them from the job's log through the backend's ``xcore_job_logs``
hook, so nothing needs installing where the job runs and no backend needs to do anything:
once a job is terminal (when ``xcore show`` or the dashboard first sees it so), and on demand
for running jobs. Values are stored as floats; ``NaN``/``Infinity`` and non-numbers are kept as
null; booleans count as 0/1. A line that is not valid JSON is ignored (it is output, not a
result). A line with a ``step`` also adds a point to each of its names' learning curves
(``xcore.runtime.series``). The same single read of a failed job's log finds its error line
(``xcore.model.error_lines``).

From Python, without xcore::

    print("XCORE_RESULT " + json.dumps({"loss": loss}), flush=True)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from xcore.errors import XcoreError
from xcore.model.error_lines import Tail, error_line, with_error
from xcore.model.status import Status
from xcore.runtime.series import SeriesSet
from xcore.store.records import JobRecord

if TYPE_CHECKING:  # not at run time: `xcore show` of finished jobs needs no plugin host (pluggy, kinds)
    from xcore.hooks.host import PluginHost
    from xcore.store import MetadataStore

MARKER = "XCORE_RESULT"
MAX_LINE = 64 * 1024  # longer lines are not results (and are not buffered whole)


def parse_line(line: str) -> dict[str, float | None] | None:
    """The results on one line, or None when the line is not a result line."""
    text = line.strip()
    if not text.startswith(MARKER):
        return None
    try:
        data = json.loads(text[len(MARKER):])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return {str(name): _number(value) for name, value in data.items()}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


class LogFindings:
    """What one pass over a log finds: its results (last value of each name), its series
    (``xcore.runtime.series``) and its tail (for a failed job's error line)."""

    def __init__(self) -> None:
        self.results: dict[str, float | None] = {}
        self.series = SeriesSet()
        self.tail = Tail()

    def read(self, chunks: Iterable[str]) -> LogFindings:
        """Every result in a stream of log chunks (lines may be split across chunks)."""
        pending = ""
        for chunk in chunks:
            self.tail.feed(chunk)
            pending += chunk
            *lines, pending = pending.split("\n")
            for line in lines:
                self._line(line)
            if len(pending) > MAX_LINE:
                pending = "-"  # a huge partial line: never a result; keep memory flat
        self._line(pending)
        return self

    def _line(self, line: str) -> None:
        values = parse_line(line)
        if values:
            self.results.update(values)
            self.series.add(values)

    @property
    def error(self) -> str:
        """The log's error line (``xcore.model.error_lines``)."""
        return error_line(self.tail.text)


def parse_chunks(chunks: Iterable[str]) -> dict[str, float | None]:
    """Every result in a stream of log chunks (lines may be split across chunks); last wins."""
    return LogFindings().read(chunks).results


def read_job_log(host: PluginHost, job: JobRecord) -> LogFindings:
    """Read the job's log (what was written so far), once, for all it tells."""
    if job.handle is None or not job.handle_kind:
        return LogFindings()
    handle = host.serializer.load(job.handle)
    return LogFindings().read(host.job_logs(job.handle_kind, handle, False))


def read_job_results(host: PluginHost, job: JobRecord) -> dict[str, float | None]:
    """Read the job's log (what was written so far) and return its results."""
    return read_job_log(host, job).results


def collect(store: MetadataStore, host: PluginHost, experiment_id: int, *,
            running: Sequence[JobRecord] = (), rows: list[dict[str, Any]] | None = None,
            pending: Sequence[int] | None = None) -> int:
    """Read the results of the experiment's terminal jobs not read yet (once per job: then
    ``final``) and of ``running`` jobs (recorded, read again next time). A log that cannot be
    read now (backend unreachable) is retried next time. Returns how many jobs were read.
    ``rows``, ``pending``: the experiment's ``store.unit_rows`` and ``store.results_pending``,
    when the caller has read them already (a failed job's error line is added to its row's
    message too)."""
    unread = set(store.results_pending(experiment_id) if pending is None else pending)
    jobs: list[JobRecord] = list(running)
    if unread:
        jobs += _pending_jobs(host, store.unit_rows(experiment_id) if rows is None else rows, unread)
    given = {row["id"]: row for unit in rows for row in unit["jobs"]} if rows is not None else {}
    read = 0
    for job, found in _read_all(host, jobs, unread):
        if found is None:
            continue
        final = job.id in unread
        series = found.series.finished()
        if series:
            store.record_series(job.id, series)
        if final and job.status is Status.FAILED:  # read once, when the job has ended: why it failed
            line = found.error
            if line:
                store.record_error_line(job.id, line)
                if job.id in given:  # the caller's rows say it too
                    given[job.id]["message"] = with_error(given[job.id]["message"] or "", line)
        if found.results or final:  # last: once final, the job is not read again
            store.record_results(job.id, found.results, final=final)
        read += 1
    return read


def _read_all(host: PluginHost, jobs: Sequence[JobRecord],
              unread: set[int]) -> Iterable[tuple[JobRecord, LogFindings | None]]:
    """Each job with what its log says (None: it cannot be read now). The jobs of a kind whose
    backend batches log reads (``xcore_job_log_lines``: one SSH command per cluster instead of
    one per job) are read together, for their result lines; a failed job just ended is read
    whole, once, for its error line too."""
    by_kind: dict[str, list[JobRecord]] = {}
    alone: list[JobRecord] = []
    for job in jobs:
        if job.handle is None or not job.handle_kind:
            yield job, LogFindings()
        elif job.status is Status.FAILED and job.id in unread:
            alone.append(job)
        else:
            by_kind.setdefault(job.handle_kind, []).append(job)
    for kind, group in by_kind.items():
        batched = _read_batched(host, kind, group)
        if batched is None:
            alone += group
        else:
            yield from batched
    for job in alone:
        try:
            yield job, read_job_log(host, job)
        except (XcoreError, OSError):
            yield job, None
        except Exception:  # noqa: BLE001 - a handle this version cannot rebuild: nothing to read, ever
            yield job, LogFindings()


def _read_batched(host: PluginHost, kind: str,
                  jobs: list[JobRecord]) -> list[tuple[JobRecord, LogFindings | None]] | None:
    """The jobs' result lines through one batched read, or None when the backend reads one log
    at a time."""
    readable: list[tuple[JobRecord, Any]] = []
    found: list[tuple[JobRecord, LogFindings | None]] = []
    for job in jobs:
        try:
            readable.append((job, host.serializer.load(job.handle)))
        except XcoreError:
            found.append((job, None))
        except Exception:  # noqa: BLE001 - as in ``_read_all``
            found.append((job, LogFindings()))
    try:
        lines = host.job_log_lines(kind, [handle for _, handle in readable], MARKER)
    except (XcoreError, OSError):
        return found + [(job, None) for job, _ in readable]
    if lines is None:
        return None
    for (job, _), job_lines in zip(readable, lines, strict=True):
        found.append((job, None if job_lines is None else LogFindings().read(line + "\n" for line in job_lines)))
    return found


def _pending_jobs(host: PluginHost, rows: list[dict[str, Any]], pending: set[int]) -> list[JobRecord]:
    """The pending jobs whose handles an installed plugin can read. A kind no plugin provides
    is skipped (and retried next time, once it may be installed) as a whole, without building
    its jobs' records: a sweep of 10,000 such jobs made every ``xcore show`` try each one."""
    readable: dict[str, bool] = {}
    jobs = []
    for unit in rows:
        for row in unit["jobs"]:
            if row["id"] not in pending:
                continue
            kind = row["handle"].get("kind") if isinstance(row["handle"], dict) else None
            if isinstance(kind, str):
                if kind not in readable:
                    try:
                        host.kinds.entry(kind)
                        readable[kind] = True
                    except XcoreError:
                        readable[kind] = False
                if not readable[kind]:
                    continue
            jobs.append(JobRecord(**{**row, "status": Status(row["status"])}))
    return jobs


def result_names(results: dict[int, dict[str, float | None]]) -> list[str]:
    """Every result name, in first-seen order (the columns of a table)."""
    names: dict[str, None] = {}
    for values in results.values():
        names.update(dict.fromkeys(values))
    return list(names)
