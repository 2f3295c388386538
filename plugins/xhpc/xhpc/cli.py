"""``xcore cluster list`` and ``xcore cluster check NAME``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def add_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser("cluster", help="list and check Slurm/SGE clusters (xhpc)",
                                   description="Clusters are configured in clusters.toml in the xcore config "
                                               "directory.")
    sub = parser.add_subparsers(dest="cluster_command", metavar="ACTION")
    p = sub.add_parser("list", help="list configured clusters")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=list_clusters)
    p = sub.add_parser("check", help="check that a cluster is reachable, its scheduler answers and staging is writable")
    p.add_argument("name", nargs="?", help="cluster name (default: XCORE_CLUSTER or the configured default)")
    p.add_argument("--local", action="store_true", help="check in login-node mode (no SSH)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=check_cluster)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def list_clusters(args: argparse.Namespace) -> int:
    from xhpc import config

    clusters, default = config.load_clusters()
    chosen = config.os.environ.get(config.ENV_CLUSTER) or default
    if args.json:
        print(json.dumps({"config": str(config.config_path()), "default": chosen,
                          "clusters": [c.to_json() for c in clusters.values()]}, indent=2))
        return 0
    if not clusters:
        print(f"No clusters configured. Add one to {config.config_path()}:\n\n"
              "[clusters.mycluster]\nhost = \"login.example.edu\"\nuser = \"me\"\nscheduler = \"slurm\"\n"
              "staging = \"/scratch/me/xcore\"")
        return 0
    rows = [("NAME", "SCHEDULER", "MODE", "ADDRESS", "STAGING")]
    for c in clusters.values():
        mark = "*" if c.name == chosen else ""
        rows.append((c.name + mark, c.scheduler, "login-node" if c.is_local else "ssh", c.address, c.staging))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    print(f"\n(* default; config: {config.config_path()})")
    return 0


def check_cluster(args: argparse.Namespace) -> int:
    from xcore.plugin import XcoreError
    from xhpc import config, transport
    from xhpc.schedulers import SCHEDULERS

    results: list[dict[str, Any]] = []

    def step(name: str, action: Any) -> bool:
        start = time.perf_counter()
        try:
            detail = action()
            seconds = round(time.perf_counter() - start, 3)
            results.append({"check": name, "ok": True, "detail": detail, "seconds": seconds})
            return True
        except (XcoreError, OSError) as exc:
            seconds = round(time.perf_counter() - start, 3)
            results.append({"check": name, "ok": False, "detail": str(exc), "seconds": seconds})
            return False

    try:
        cluster = config.resolve(args.name)
    except XcoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.local:
        cluster = cluster.as_local()
    conn = transport.connect(cluster)
    scheduler = SCHEDULERS[cluster.scheduler]

    def reach() -> str:
        conn.check("true", "A trivial command")
        return cluster.address

    def answer() -> str:
        out = conn.check(scheduler.check_command(), f"Asking {cluster.scheduler}").out.strip()
        return out.splitlines()[-1] if out else "ok"

    def staging() -> str:
        s = transport.shell_path(cluster.staging)
        # umask 077 as the launch uses: a root this check makes is 0700, like the one a launch makes
        out = conn.check(f"umask 077 && mkdir -p {s} && cd {s} && f=.xhpc-check.$$ && echo ok > $f && rm -f $f && pwd",
                         f"Writing to the staging directory {cluster.staging}").out.strip()
        return out

    ok = step("ssh reachable" if not cluster.is_local else "shell", reach)
    ok = ok and step("scheduler answers", answer)
    ok = ok and step("staging writable", staging)
    if args.json:
        print(json.dumps({"cluster": cluster.name, "ok": ok, "checks": results}, indent=2))
    else:
        print(f"cluster {cluster.name} ({cluster.scheduler}, {cluster.address})")
        for r in results:
            print(f"  {'ok  ' if r['ok'] else 'FAIL'} {r['check']}: {r['detail']}")
    return 0 if ok else 1
