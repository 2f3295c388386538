"""``xcore vertex list`` and ``xcore vertex check [TARGET]`` (same shape as ``xcore cluster check``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def add_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser("vertex", help="list and check Vertex AI targets (xgcp)",
                                   description="Targets are configured in vertex.toml in the xcore config directory.")
    sub = parser.add_subparsers(dest="vertex_command", metavar="ACTION")
    p = sub.add_parser("list", help="list configured targets")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=list_targets)
    p = sub.add_parser("check", help="check credentials, project, Vertex API and quota for a target")
    p.add_argument("name", nargs="?", help="target name (default: XGCP_TARGET or the configured default)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=check_target)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def list_targets(args: argparse.Namespace) -> int:
    from xcore.plugin import XcoreError
    from xgcp import config

    try:
        targets, default = config.load_targets()
    except XcoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"config": str(config.config_path()), "default": default,
                          "targets": [t.to_json() for t in targets.values()]}, indent=2))
        return 0
    if not targets:
        print(f"No Vertex targets configured. Add one to {config.config_path()}:\n\n"
              "[targets.dev]\nproject = \"my-project\"\nlocation = \"us-central1\"")
        return 0
    for t in targets.values():
        print(f"{t.name}{'*' if t.name == default else ''}  {t.project}  {t.location}  {t.registry or ''}".rstrip())
    return 0


def check_target(args: argparse.Namespace) -> int:
    """Credentials, project and Vertex API, then quota (a warning only: jobs may still run) and
    the image registry when the target names one.
    Each failure is one sentence that says what to run."""
    from xcore.plugin import XcoreError
    from xgcp import api, config, quota

    results: list[dict[str, Any]] = []

    def step(name: str, action: Any) -> bool:
        start = time.perf_counter()
        warning = False
        try:
            detail, ok = action(), True
        except quota.QuotaNotVisible as exc:
            detail, ok, warning = str(exc), True, True
        except XcoreError as exc:
            detail, ok = str(exc), False
        except Exception as exc:  # noqa: BLE001  (any Google API error: one sentence with what to run)
            detail, ok = api.explain(exc, target.project, endpoint), False
        results.append({"check": name, "ok": ok, "warning": warning, "detail": detail,
                        "seconds": round(time.perf_counter() - start, 3)})
        return ok

    try:
        target = config.resolve(args.name)
    except XcoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    endpoint = config.api_endpoint(target.location, target)

    def credentials() -> str:
        creds = config.credentials(endpoint)
        return "anonymous (local emulator)" if config.is_emulator(endpoint) else type(creds).__name__

    def reachable() -> str:
        jobs = api.client(target.location, target).list_custom_jobs(
            request={"parent": api.parent(target.project, target.location), "page_size": 1})
        next(iter(jobs.pages), None)
        return f"listed custom jobs in {api.parent(target.project, target.location)} ({endpoint})"

    def quotas() -> str:
        found = quota.training_quotas(target.project, target.location, target)
        problem = quota.warning(found, target.location, target.project)
        if problem:
            raise quota.QuotaNotVisible(problem)
        return quota.summary(found, target.location)

    def registry() -> str:
        from xcore import images

        return images.check_registry(target.registry or "")

    ok = step("credentials found", credentials)
    ok = ok and step("project reachable, Vertex API enabled", reachable)
    if ok:
        step("custom-training quota", quotas)
    if ok and target.registry:
        ok = step("image registry", registry)
    if args.json:
        print(json.dumps({"target": target.name, "ok": ok, "checks": results}, indent=2))
    else:
        print(f"vertex target {target.name} ({target.project}, {target.location})")
        for r in results:
            mark = "warn" if r["warning"] else "ok  " if r["ok"] else "FAIL"
            print(f"  {mark} {r['check']}: {r['detail']}")
    return 0 if ok else 1
