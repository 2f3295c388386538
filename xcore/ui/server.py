"""``xcore ui``: open the store, keep active jobs' status and results fresh in the
background, and serve the dashboard with Uvicorn."""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import socket
import sys
import threading

from xcore.errors import XcoreError

EXTRA_HINT = "xcore ui needs the dashboard's libraries: pip install 'xcore-core[ui]'"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def catch_up(store: object, host: object, stop: threading.Event, experiments: int = 50) -> None:
    """Read the results of the newest experiments' jobs that ended while no one looked. Run by
    the refresher after the server listens (it once ran first and kept the dashboard from
    answering for 5-25 s); each experiment's unread logs are read in one batch per backend
    (``xcore_job_log_lines``: one ``grep`` over SSH per cluster, not one command per job)."""
    from xcore.runtime import results

    for record in store.list_experiments(limit=experiments):  # type: ignore[attr-defined]
        if stop.is_set():
            return
        try:
            results.collect(store, host, record.id)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - keep serving; say why
            print(f"xcore ui: reading the results of experiment {record.id} failed: {exc}", file=sys.stderr)


def refresh_forever(store: object, host: object, stop: threading.Event, interval: float) -> None:
    """First ``catch_up``; then every ``interval`` s: ask the backends about the active jobs of
    the newest experiments and read the results of jobs that ended, so pages show what the
    backends know."""
    from xcore.runtime import results
    from xcore.runtime.tracking import refresh_jobs

    catch_up(store, host, stop)
    watched: set[int] = set()
    while not stop.wait(interval):
        try:
            active = [r.id for r in store.list_experiments(limit=500) if r.has_active_units][:200]  # type: ignore[attr-defined]
            if active:
                refresh_jobs(store, host, store.active_jobs(active))  # type: ignore[arg-type, attr-defined]
            for experiment_id in watched | set(active):
                results.collect(store, host, experiment_id)  # type: ignore[arg-type]
            watched = set(active)
        except Exception as exc:  # noqa: BLE001 - keep serving; say why the refresh failed
            print(f"xcore ui: refreshing status failed: {exc}", file=sys.stderr)


def _shown_host(host: str) -> str:
    """The host for the printed URL: a wildcard address is this machine's name, which a
    colleague can open (0.0.0.0 only works on this machine)."""
    bare = host.strip("[]")
    if bare in ("0.0.0.0", "::"):
        return socket.getfqdn() or socket.gethostname()
    return f"[{bare}]" if ":" in bare else bare


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from xcore.ui.app import LOOPBACK, create_app
    except ImportError as exc:
        raise XcoreError(f"{EXTRA_HINT} ({exc}).") from None
    from xcore.workspace import current

    token = args.token or os.environ.get("XCORE_UI_TOKEN") or None
    exposed = not is_loopback(args.host)
    if getattr(args, "no_token", False):
        if exposed:
            raise XcoreError("--no-token serves without a token, so only on a loopback address (127.0.0.1); "
                             f"{args.host} is reachable from other machines.")
        if token:
            raise XcoreError("--no-token and a token (--token or XCORE_UI_TOKEN) contradict each other; choose one.")
    # A token by default, loopback too: other users of a shared machine can reach 127.0.0.1.
    generated = not token and not getattr(args, "no_token", False)
    if generated:
        token = secrets.token_urlsafe(24)  # printed once in the URL: the only way to hand it over
    if token is not None and len(token) < 16:
        raise XcoreError("--token must be at least 16 characters (or leave it out to get a random one).")
    workspace = current()
    store, host = workspace.settled_store(), workspace.host
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host.strip("[]"), args.port))
    except OSError as exc:
        raise XcoreError(f"Cannot listen on {args.host}:{args.port}: {exc.strerror or exc}. "
                         f"Choose another --port (0 picks a free one).") from None
    sock.listen(2048)  # connections queue from now on, so the printed URL works at once
    port = sock.getsockname()[1]
    allowed = ["*"] if exposed else [*LOOPBACK, args.host.strip("[]"), f"[{args.host.strip('[]')}]"]
    app = create_app(store, host, read_only=args.read_only, token=token, allowed_hosts=allowed,
                     poll_seconds=args.poll, cookie=f"xcore_ui_token_{port}")
    shown = _shown_host(args.host)
    url = f"http://{shown}:{port}/" + (f"?token={token}" if generated else "")  # a token you chose is never echoed
    mode = " (read-only)" if args.read_only else ""
    print(f"xcore ui{mode}: {url}", flush=True)
    if exposed:
        print("xcore ui: reachable from other machines; anyone with the token can see (and cancel) your work.",
              file=sys.stderr, flush=True)
    stop = threading.Event()
    refresher = threading.Thread(target=refresh_forever, args=(store, host, stop, args.poll), daemon=True,
                                 name="xcore-ui-refresh")
    refresher.start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        stop.set()
        sock.close()
    return 0
