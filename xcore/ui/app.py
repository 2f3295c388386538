"""The dashboard's ASGI app: pages, JSON for charts and live updates, cancel, and the safety
rules (loopback Host check, token, CSRF, escaping via Jinja2 autoescape, a strict CSP)."""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from xcore.cli.tables import format_duration
from xcore.errors import NotFoundError, XcoreError
from xcore.hooks.host import PluginHost
from xcore.model.filters import FilterError
from xcore.model.status import Status
from xcore.settings import env_number
from xcore.store import MetadataStore
from xcore.ui import charts, data, logs
from xcore.workspace.views import ExperimentView, UnitView, read_units

HERE = Path(__file__).resolve().parent
LOOPBACK = ["127.0.0.1", "localhost", "::1", "[::1]"]
COOKIE = "xcore_ui_token"  # the default cookie name; `xcore ui` names one per port (cookies ignore ports)
LOG_LIMIT = 2 * 1024 * 1024  # bytes of a log sent at once (the newest; the page offers the whole file)
SLOW_READ = 0.5  # seconds: an experiment read slower than this is refreshed in the background
STALE_SECS = 60.0  # ... and its previous rows served meanwhile, when no older than this
REREAD_FACTOR = 5  # a read is reused for at least this many times as long as it took
MAX_COMPARED = 50  # trials compared or overlaid at once
MAX_ID = 2**63 - 1  # ids are 64-bit in every store: a larger one names nothing (and overflows a query)
STATIC = ("ui.js", "ui.css", "charts.js", "parcoords.js", "uPlot.iife.min.js", "uPlot.min.css")  # /static/NAME
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


class _Security(BaseHTTPMiddleware):
    """Token check (when set) and security headers on every response."""

    def __init__(self, app: Any, token: str | None, cookie: str = COOKIE) -> None:
        super().__init__(app)
        self.token, self.cookie = token, cookie

    async def dispatch(self, request: Request, call_next: Any) -> Response:
        if self.token:
            given = request.query_params.get("token")
            if given is not None and _same(given, self.token):
                query = {k: v for k, v in request.query_params.items() if k != "token"}
                target = request.url.path + (f"?{urlencode(query)}" if query else "")
                response: Response = RedirectResponse(target, status_code=303)
                response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict")
                return self._headers(response)
            cookie = request.cookies.get(self.cookie, "")
            bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
            if not (_same(cookie, self.token) or _same(bearer, self.token)):
                return self._headers(PlainTextResponse(
                    "xcore ui: this dashboard needs its token: open the URL `xcore ui` printed (…/?token=...).",
                    status_code=401))
        return self._headers(await call_next(request))

    @staticmethod
    def _headers(response: Response) -> Response:
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers.setdefault("Cache-Control", "no-store")
        return response


def _same(given: str, secret: str) -> bool:
    """A constant-time comparison of any text a client sends (``hmac.compare_digest`` raises on
    non-ASCII str, which was a 500 for a non-ASCII token, cookie, bearer header or CSRF value)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), secret.encode("utf-8"))


def _ids_in_range(endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
    """``endpoint`` answering 404 for an id no store can hold (>= 2**63) instead of a 500 from
    the store's integer overflow."""
    import functools
    import inspect

    def too_big(request: Request) -> bool:
        return any(isinstance(v, int) and v > MAX_ID for v in request.path_params.values())

    def missing(request: Request) -> Response:
        if request.url.path.startswith("/api/") or request.url.path.endswith("/log"):
            return JSONResponse({"error": "not found"}, status_code=404)
        return PlainTextResponse("not found", status_code=404)

    if inspect.iscoroutinefunction(endpoint):
        @functools.wraps(endpoint)
        async def guarded_async(request: Request) -> Any:
            return missing(request) if too_big(request) else await endpoint(request)

        return guarded_async

    @functools.wraps(endpoint)
    def guarded(request: Request) -> Any:
        return missing(request) if too_big(request) else endpoint(request)

    return guarded


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _fmt_time(value: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value)) if value else ""


def _fmt_duration(value: float | None) -> str:
    if value is None:
        return ""
    if value < 60:
        return format_duration(value)  # as `xcore show` writes it: milliseconds below a second
    value = int(value)
    hours, rest = divmod(value, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _prices() -> tuple[Any, str]:
    """``config.toml``'s price table (read on every request: an edit shows at once) and, for a
    bad one, what to say on the page instead of breaking it."""
    from xcore.errors import ConfigurationError
    from xcore.model.usage import configured_prices

    try:
        return configured_prices(), ""
    except ConfigurationError as exc:
        return None, f"cost: {exc}"


def _usage_line(rows: list[UnitView], prices: Any = None, error: str | None = None) -> str:
    """The experiment's resource-hours and cost as ``xcore show`` writes them."""
    from xcore.model.usage import Meter, Usage

    if error is None:
        prices, error = _prices()
    if error:
        return error
    used = Meter(time.time(), prices).jobs(job for row in rows for job in row.jobs)
    return "" if used == Usage() else used.describe(prices.currency if prices is not None else "")


def _group_where(args: dict[str, Any]) -> str:
    """The filter that selects one group's trials: ``lr=0.1 depth=8`` (text values quoted)."""
    terms = []
    for name, value in args.items():
        text = data.cell(value)
        terms.append(f"{name}={text}" if isinstance(value, (int, float)) and not isinstance(value, bool)
                     else f"{name}={json.dumps(text)}")
    return " ".join(terms)


def _is_web_link(url: str) -> bool:
    return url.lower().startswith(("https://", "http://"))


def create_app(store: MetadataStore, host: PluginHost, *, read_only: bool = False, token: str | None = None,
               allowed_hosts: list[str] | None = None, poll_seconds: float = 3.0, cookie: str = COOKIE) -> Starlette:
    """The dashboard over ``store``. ``token``: required on every request, static files
    included (the ``cookie`` after the first ``?token=``). ``allowed_hosts``: Host headers
    accepted (loopback names by default, against DNS rebinding)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True)
    templates = Jinja2Templates(env=env)
    env.globals.update(group_where=_group_where)
    env.globals.update(fmt_time=_fmt_time, fmt_duration=_fmt_duration, cell=data.cell, is_web_link=_is_web_link,
                       read_only=read_only, poll_ms=int(poll_seconds * 1000), statuses=list(Status.__members__))
    csrf = secrets.token_urlsafe(32)
    cache_secs = env_number("XCORE_UI_CACHE_SECS", 2)
    cache: dict[int, tuple[float, list[UnitView], dict[str, Any], float]] = {}  # id: (read at, rows, derived, took)
    cache_lock = threading.Lock()
    refreshing: set[int] = set()
    dropped: dict[int, float] = {}  # id: when its rows were dropped (a cancel): older reads are not kept

    def read(experiment_id: int) -> list[UnitView]:
        start = time.monotonic()
        rows = read_units(store, experiment_id)
        with cache_lock:
            newer = cache[experiment_id][0] if experiment_id in cache else dropped.get(experiment_id, 0.0)
            if start >= newer:  # never over a newer read, nor a read from before a cancel
                cache[experiment_id] = (start, rows, {}, time.monotonic() - start)
            for old in sorted(cache, key=lambda k: cache[k][0])[:-16]:  # keep the 16 most recent
                del cache[old]
            refreshing.discard(experiment_id)
        return rows

    def refresh_later(experiment_id: int) -> None:
        with cache_lock:
            if experiment_id in refreshing:
                return
            refreshing.add(experiment_id)

        def run() -> None:
            try:
                read(experiment_id)
            finally:
                with cache_lock:
                    refreshing.discard(experiment_id)

        threading.Thread(target=run, name=f"xcore-ui-read-{experiment_id}", daemon=True).start()

    def rows_of(experiment_id: int, fresh: bool = False) -> list[UnitView]:
        """An experiment's rows, read at most every XCORE_UI_CACHE_SECS (default 2 s) however
        many pages, sorts and polls ask: a 10,000-trial sweep is read once per interval. A
        read is reused for at least REREAD_FACTOR times as long as it took, so that reading
        takes at most a sixth of the server's time. A sweep whose read took over SLOW_READ
        seconds (100,000 trials: 2-5 s) is then answered from its previous read while a thread
        reads it anew: its pages cost what a cached page costs and follow the sweep a few reads
        behind."""
        now = time.monotonic()
        with cache_lock:
            hit = cache.get(experiment_id)
        if hit is not None and not fresh:
            age, took = now - hit[0], hit[3]
            if age < max(cache_secs, REREAD_FACTOR * took):
                return hit[1]
            if took > SLOW_READ and age < max(STALE_SECS, 2 * REREAD_FACTOR * took):
                refresh_later(experiment_id)
                return hit[1]
        return read(experiment_id)

    def once(experiment_id: int, rows: list[UnitView], name: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, kept with the cached ``rows`` it reads: the columns, the usage line,
        the summary's version and the chart's JSON are worked out once per read of the store, not
        once per request (over 100,000 trials each costs tens to hundreds of milliseconds)."""
        with cache_lock:
            hit = cache.get(experiment_id)
        if hit is None or hit[1] is not rows:
            return compute()
        if name not in hit[2]:
            hit[2][name] = compute()  # a race computes it twice, harmlessly
        return hit[2][name]

    def render(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
        return templates.TemplateResponse(request, name, {"csrf": csrf, **context}, status_code=status_code)

    def not_found(request: Request, message: str) -> Response:
        return render(request, "error.html", {"message": message}, status_code=404)

    def experiments(request: Request) -> Response:
        params = request.query_params
        page = data.experiments_page(store, q=params.get("q", ""), status=params.get("status", ""),
                                     user=params.get("user", ""), page=_int(params.get("page"), 1))
        return render(request, "list.html", {"page": page, "q": params.get("q", ""),
                                             "status": params.get("status", ""), "user": params.get("user", ""),
                                             "query": _query(request)})

    def selected(request: Request, experiment_id: int) -> tuple[list[UnitView], list[UnitView], str]:
        """The experiment's rows, and those the page's filters select in its order, with the
        filter's message ("" when it reads; then nothing is selected)."""
        params = request.query_params
        rows = rows_of(experiment_id)
        status, q, where = params.get("status", ""), params.get("q", ""), params.get("where", "")
        sort = params.get("sort", "id")
        if not (status or q or where.strip()):
            return rows, once(experiment_id, rows, "sort:" + sort, lambda: data.sort_rows(rows, sort)), ""
        try:
            shown = data.filter_rows(rows, status=status, q=q, where=where)
        except FilterError as exc:
            return rows, [], str(exc)
        return rows, data.sort_rows(shown, sort), ""

    def grouped(group_by: str, shown: list[UnitView]) -> tuple[list[Any], str]:
        """The groups (``xcore show --group-by``'s) of the rows shown, and a message for a bad
        ``group_by`` ("" when it reads)."""
        from xcore.errors import XcoreError
        from xcore.workspace.groups import group_units, parse_names, sort_groups

        if not group_by.strip():
            return [], ""
        try:
            return sort_groups(group_units(shown, parse_names(group_by)), None), ""
        except XcoreError as exc:
            return [], str(exc)

    def _units_view(request: Request, experiment_id: int) -> dict[str, Any]:
        params = request.query_params
        rows, shown, bad = selected(request, experiment_id)
        arg_names, result_names = once(experiment_id, rows, "columns", lambda: data.columns(rows))
        groups, group_error = grouped(params.get("group_by", ""), shown)
        return {"groups": groups, "group_by": params.get("group_by", ""), "group_error": group_error,
                "rows": rows, "page": data.paginate(shown, _int(params.get("page"), 1)), "arg_names": arg_names,
                "result_names": result_names, "sort": params.get("sort", "id"), "status": params.get("status", ""),
                "q": params.get("q", ""), "where": params.get("where", ""), "bad_filter": bad,
                "query": _query(request), "experiment_id": experiment_id, "matching": len(shown)}

    def experiment(request: Request) -> Response:
        experiment_id = request.path_params["experiment_id"]
        try:
            record = store.get_experiment(experiment_id)
        except NotFoundError:
            return not_found(request, f"No experiment {experiment_id}.")
        view = _units_view(request, experiment_id)
        prices, error = _prices()  # part of the cached line's key: a changed table shows at once
        usage = error or once(experiment_id, view["rows"], f"usage {prices!r}",
                              lambda: _usage_line(view["rows"], prices, ""))
        return render(request, "experiment.html", {"record": record, "counts": ExperimentView(record).counts,
                                                   "usage": usage, **view},
                      status_code=400 if view["bad_filter"] else 200)

    def table(request: Request) -> Response:
        experiment_id = request.path_params["experiment_id"]
        view = _units_view(request, experiment_id)
        return render(request, "_table.html", view, status_code=400 if view["bad_filter"] else 200)

    def export_csv(request: Request) -> Response:
        """The filtered, sorted table as CSV (``xcore show --csv``'s text), or grouped by
        ``group_by``; ``columns`` chooses columns."""
        from xcore.errors import XcoreError
        from xcore.workspace.export import group_csv, parse_columns, unit_csv

        experiment_id = request.path_params["experiment_id"]
        params = request.query_params
        try:
            store.get_experiment(experiment_id)
        except NotFoundError:
            return PlainTextResponse("not found", status_code=404)
        rows, shown, bad = selected(request, experiment_id)
        if bad:
            return PlainTextResponse(bad, status_code=400)
        try:
            columns = parse_columns(params.get("columns") or None)
            if params.get("group_by"):
                from xcore.workspace.groups import group_units, parse_names, sort_groups

                names = parse_names(params["group_by"])
                groups = sort_groups(group_units(shown, names), None)
                text = group_csv(groups, names, data.columns(shown)[1], columns)
            else:
                text = unit_csv(shown, columns)
        except XcoreError as exc:
            return PlainTextResponse(str(exc), status_code=400)
        return Response(text, media_type="text/csv; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="experiment-{experiment_id}.csv"'})

    def compare(request: Request) -> Response:
        """The selected trials side by side: the arguments that differ first, then results."""
        experiment_id = request.path_params["experiment_id"]
        try:
            record = store.get_experiment(experiment_id)
        except NotFoundError:
            return not_found(request, f"No experiment {experiment_id}.")
        wanted = request.query_params.getlist("unit")
        if not wanted or len(wanted) > MAX_COMPARED or not all(w.isdigit() and int(w) <= MAX_ID for w in wanted):
            return render(request, "error.html", {"message": f"Choose 1 to {MAX_COMPARED} work units to compare "
                                                             "(tick them in the experiment's table)."}, status_code=400)
        ids = list(dict.fromkeys(int(w) for w in wanted))
        order = {unit_id: at for at, unit_id in enumerate(ids)}
        units = sorted(read_units(store, experiment_id, ids), key=lambda u: order[u.id])  # as ticked in the table
        if len(units) != len(ids):
            return not_found(request, f"Experiment {experiment_id} has no work unit "
                                      f"{', '.join(str(i) for i in sorted(set(ids) - {u.id for u in units}))}.")
        arg_names, result_names = data.columns(units)
        differ = [a for a in arg_names if len({data.cell(u.named_args.get(a)) for u in units}) > 1]
        same = [a for a in arg_names if a not in differ]
        series = store.series(experiment_id, ids)
        return render(request, "compare.html", {
            "record": record, "units": units, "differ": differ, "same": same, "result_names": result_names,
            "series": [{"id": u.id, "series": series.get(u.id, {})} for u in units],  # in the table's order
            "has_series": any(series.values())})

    def curves(request: Request) -> Response:
        """Learning curves of some trials: those named by ``unit``, else the first ``top``
        (default 10) the page's filters and sort select."""
        experiment_id = request.path_params["experiment_id"]
        params = request.query_params
        wanted = [int(w) for w in params.getlist("unit") if w.isdigit() and int(w) <= MAX_ID][:MAX_COMPARED]
        if wanted:
            ids = wanted
        else:
            _, shown, bad = selected(request, experiment_id)
            if bad:
                return JSONResponse({"error": bad}, status_code=400)
            ids = [u.id for u in shown[: min(max(_int(params.get("top"), 10), 1), MAX_COMPARED)]]
        series = store.series(experiment_id, ids) if ids else {}
        names = list(dict.fromkeys(n for unit in series.values() for n in unit))
        answer: dict[str, Any] = {"names": names, "units": [{"id": i, "series": series[i]} for i in ids if i in series]}
        if params.get("group_by", "").strip():
            answer["groups"] = group_curves(request, experiment_id, params["group_by"], answer)
        return JSONResponse(answer)

    def group_curves(request: Request, experiment_id: int, group_by: str, answer: dict[str, Any]
                     ) -> dict[str, list[dict[str, Any]]]:
        """Each series name's group means with their std (``charts.group_curves``), over the
        trials the page's filters select (an even sample of MAX_GROUP_TRIALS when more),
        grouped by ``group_by``."""
        from xcore.errors import XcoreError
        from xcore.workspace.groups import parse_names

        _, shown, _ = selected(request, experiment_id)
        try:
            names = parse_names(group_by)
        except XcoreError:  # the table says what is wrong with it
            return {}
        shown = charts.sample([u for u in shown if u.role == "work_unit"], charts.MAX_GROUP_TRIALS)
        series = store.series(experiment_id, [u.id for u in shown]) if shown else {}
        members: dict[str, dict[str, list[Any]]] = {}  # series name: group label: members' points
        for unit in shown:
            label = " ".join(f"{n}={data.cell(unit.named_args.get(n))}" for n in names)
            for name, points in series.get(unit.id, {}).items():
                members.setdefault(name, {}).setdefault(label, []).append(points)
        for name in members:
            if name not in answer["names"]:
                answer["names"].append(name)
        return {name: charts.group_curves(groups) for name, groups in members.items()}

    def summary(request: Request) -> Response:
        experiment_id = request.path_params["experiment_id"]
        try:
            record = store.get_experiment(experiment_id)
        except NotFoundError:
            return JSONResponse({"error": "not found"}, status_code=404)
        rows = rows_of(experiment_id)  # the rows the table is rendered from, so a change is never missed
        version = once(experiment_id, rows, "version", lambda: json.dumps([
            sorted(Counter(r.status.value for r in rows).items()), sum(len(r.results) for r in rows),
            sum(len(r.message) for r in rows), len(rows)]))
        return JSONResponse({"status": record.status.value, "counts": dict(ExperimentView(record).counts),
                             "version": version})

    def chart(request: Request) -> Response:
        experiment_id = request.path_params["experiment_id"]
        rows = rows_of(experiment_id)
        arg_names, result_names = once(experiment_id, rows, "columns", lambda: data.columns(rows))
        body = once(experiment_id, rows, "chart", lambda: json.dumps(
            charts.payload(rows, arg_names, result_names), ensure_ascii=False, allow_nan=False,
            separators=(",", ":")).encode())
        return Response(body, media_type="application/json")

    def unit(request: Request) -> Response:
        experiment_id, unit_id = request.path_params["experiment_id"], request.path_params["unit_id"]
        try:
            record = store.get_experiment(experiment_id)
        except NotFoundError:
            return not_found(request, f"No experiment {experiment_id}.")
        units = store.work_units(experiment_id, [unit_id])
        if not units:
            return not_found(request, f"Experiment {experiment_id} has no work unit {unit_id}.")
        [row] = read_units(store, experiment_id, [unit_id])
        history = {job.id: store.job_history(job.id) for job in units[0].jobs}
        series = store.series(experiment_id, [unit_id]).get(unit_id, {})
        attempts = {job["id"]: job["attempts"] for job in row.jobs if len(job.get("attempts", ())) > 1}
        return render(request, "unit.html", {"record": record, "unit": units[0], "row": row, "history": history,
                                             "series": series, "usage": _usage_line([row]), "attempts": attempts})

    def log(request: Request) -> Response:
        experiment_id, unit_id = request.path_params["experiment_id"], request.path_params["unit_id"]
        units = store.work_units(experiment_id, [unit_id])
        jobs = [j for u in units for j in u.jobs if j.name == request.query_params.get("job", j.name)]
        if not jobs:
            return JSONResponse({"error": "no such job"}, status_code=404)
        job = jobs[0]
        if request.query_params.get("attempt") is not None:  # an earlier attempt's own log, where it has one
            from xcore.workspace.attempts import attempt_of

            try:
                job = attempt_of(store, experiment_id, unit_id, job, _int(request.query_params.get("attempt"), 0))
            except XcoreError as exc:
                return JSONResponse({"error": str(exc)}, status_code=404)
        if job.handle is None:
            return JSONResponse({"text": f"(never launched: {job.message or job.status.value})\n", "partial": "",
                                 "start": 0, "offset": 0, "done": True})
        done = job.status.is_terminal
        local = job.log_path if job.log_path and os.path.isfile(job.log_path) else None
        if request.query_params.get("whole"):
            if local:
                return FileResponse(local, media_type="text/plain; charset=utf-8")
            try:
                return PlainTextResponse(read_whole(job))
            except Exception as exc:  # noqa: BLE001 - said instead of a 500
                return PlainTextResponse(f"(cannot read the log: {exc})\n", status_code=502)
        offset = max(0, _int(request.query_params.get("offset"), 0))
        try:
            if local:  # seeked to the offset: a poll reads only what was written since
                answer = logs.read_file(local, offset, LOG_LIMIT, done)
            else:
                answer = logs.read_text(read_whole(job), offset, LOG_LIMIT, done)
        except Exception as exc:  # noqa: BLE001 - shown in the page instead of the log
            return JSONResponse({"text": f"(cannot read the log: {exc})\n", "partial": "", "start": offset,
                                 "offset": offset, "done": True})
        return JSONResponse({**answer, "done": done})

    def read_whole(job: Any) -> str:
        handle = host.serializer.load(job.handle)
        return "".join(host.job_logs(job.handle_kind or "", handle, False))

    async def cancel(request: Request) -> Response:
        if read_only:
            return PlainTextResponse("This dashboard is read-only (--read-only).", status_code=403)
        body = await request.body()  # a urlencoded form; parsed here, no multipart library needed
        given = parse_qs(body.decode("utf-8", "replace")).get("csrf", [""])[0] if len(body) < 4096 else ""
        if not _same(given, csrf):
            return PlainTextResponse("Bad or missing CSRF token: reload the page and try again.", status_code=403)
        experiment_id = request.path_params["experiment_id"]
        unit_id = request.path_params.get("unit_id")
        from starlette.concurrency import run_in_threadpool

        from xcore.runtime.tracking import cancel_jobs

        def run() -> None:
            units = store.work_units(experiment_id, None if unit_id is None else [unit_id])
            cancel_jobs(store, host, [j for u in units for j in u.jobs])

        await run_in_threadpool(run)
        with cache_lock:
            cache.pop(experiment_id, None)
            dropped[experiment_id] = time.monotonic()
        target = f"/experiments/{experiment_id}" + (f"/units/{unit_id}" if unit_id is not None else "")
        return RedirectResponse(target, status_code=303)

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name in STATIC:
            path = HERE / "static" / name
        else:
            return PlainTextResponse("not found", status_code=404)
        response = FileResponse(path)
        response.headers["Cache-Control"] = "max-age=3600"
        return response

    routes = [
        Route("/", experiments),
        Route("/experiments/{experiment_id:int}", _ids_in_range(experiment)),
        Route("/experiments/{experiment_id:int}/table", _ids_in_range(table)),
        Route("/experiments/{experiment_id:int}/csv", _ids_in_range(export_csv)),
        Route("/experiments/{experiment_id:int}/compare", _ids_in_range(compare)),
        Route("/api/experiments/{experiment_id:int}/curves", _ids_in_range(curves)),
        Route("/experiments/{experiment_id:int}/cancel", _ids_in_range(cancel), methods=["POST"]),
        Route("/experiments/{experiment_id:int}/units/{unit_id:int}", _ids_in_range(unit)),
        Route("/experiments/{experiment_id:int}/units/{unit_id:int}/log", _ids_in_range(log)),
        Route("/experiments/{experiment_id:int}/units/{unit_id:int}/cancel", _ids_in_range(cancel), methods=["POST"]),
        Route("/api/experiments/{experiment_id:int}/summary", _ids_in_range(summary)),
        Route("/api/experiments/{experiment_id:int}/chart", _ids_in_range(chart)),
        Route("/static/{name}", static),
    ]
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or LOOPBACK),
        Middleware(_Security, token=token, cookie=cookie),
    ]
    return Starlette(routes=routes, middleware=middleware)


def _query(request: Request) -> Any:
    """``query(page=2)``: the current query string with some parameters changed."""
    current = dict(request.query_params)
    current.pop("token", None)

    def build(**changes: Any) -> str:
        merged = {**current, **{k: v for k, v in changes.items()}}
        return "?" + urlencode({k: v for k, v in merged.items() if v not in (None, "")})

    return build
