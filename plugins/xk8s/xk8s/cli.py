"""``xcore k8s list`` and ``xcore k8s check [TARGET]`` (like ``xcore cluster check`` in xhpc)."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any, cast


def add_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser("k8s", help="list and check Kubernetes targets (xk8s)",
                                   description="Kubernetes targets from k8s.toml in the xcore config directory.")
    sub = parser.add_subparsers(dest="k8s_command", metavar="COMMAND")
    p = sub.add_parser("list", help="list the targets of k8s.toml")
    p.set_defaults(func=list_targets)
    p = sub.add_parser("check", help="check that the API answers, the namespace exists, permissions and the queue")
    p.add_argument("target", nargs="?", help="a target of k8s.toml (default: XK8S_TARGET, the file's default)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=check_target)
    parser.set_defaults(func=lambda args: (parser.print_help(), 0)[1])


def list_targets(args: argparse.Namespace) -> int:
    from xk8s import targets

    for name in targets.names():
        t = targets.get(name)
        print(f"{name}\tcontext={t.context or '(current)'}\tnamespace={t.namespace}\tqueue={t.queue or '-'}")
    return 0


def checks(context: str | None, namespace: str, queue: str | None, registry: str | None
           ) -> list[tuple[str, Callable[[], str]]]:
    from xk8s import client

    def api() -> str:
        from kubernetes import client as k

        version = k.VersionApi(client.api_client(context)).get_code()
        return f"Kubernetes {version.git_version}"

    def ns() -> str:
        client.core(context).read_namespace(namespace)
        return f"namespace {namespace} exists"

    def allowed(verb: str, resource: str, group: str = "batch", sub: str | None = None) -> Callable[[], str]:
        def run() -> str:
            from kubernetes import client as k

            review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                      "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": group,
                                                      "resource": resource, **({"subresource": sub} if sub else {})}}}
            api = k.AuthorizationV1Api(client.api_client(context))
            answer: Any = api.create_self_subject_access_review(cast(Any, review))  # a dict body is accepted
            what = f"{verb} {resource}{'/' + sub if sub else ''}"
            if not answer.status.allowed:
                raise PermissionError(f"not allowed to {what} in {namespace}: {answer.status.reason or 'denied'}")
            return f"may {what}"
        return run

    def local_queue() -> str:
        ApiException = client.api_exception()
        for version in ("v1beta1", "v1beta2"):  # v1beta1: every Kueue release so far; v1beta2: newer ones
            try:
                found: Any = client.custom(context).get_namespaced_custom_object(
                    "kueue.x-k8s.io", version, namespace, "localqueues", queue)
            except ApiException as exc:
                if exc.status == 404 and version == "v1beta1":
                    continue
                if exc.status == 404:
                    raise LookupError(f"no Kueue LocalQueue {queue} in namespace {namespace} (or Kueue is not "
                                      "installed): ask the cluster admin, or fix the target's queue") from None
                raise
            cluster_queue = (found.get("spec") or {}).get("clusterQueue", "?")
            return f"Kueue LocalQueue {queue} exists (ClusterQueue {cluster_queue})"
        raise AssertionError("unreachable")

    def registry_up() -> str:
        from xcore import images

        return images.check_registry(registry or "")

    out = [("API server", api), ("namespace", ns), ("create jobs", allowed("create", "jobs")),
           ("list jobs", allowed("list", "jobs")), ("delete jobs", allowed("delete", "jobs")),
           ("list pods", allowed("list", "pods", "")), ("read pod logs", allowed("get", "pods", "", "log")),
           ("create configmaps", allowed("create", "configmaps", ""))]
    if queue:
        out.append(("Kueue queue", local_queue))
        out.append(("list Kueue workloads", allowed("list", "workloads", "kueue.x-k8s.io")))
    if registry:
        out.append(("registry", registry_up))
    return out


def check_target(args: argparse.Namespace) -> int:
    from xk8s import client, targets

    target = targets.get(args.target)
    results = []
    for name, run in checks(target.context, target.namespace, target.queue, target.registry):
        start = time.perf_counter()
        try:
            detail, ok = run(), True
        except Exception as exc:  # noqa: BLE001 - each check reports its own failure and the next one runs
            detail, ok = client.describe(exc), False
        results.append({"check": name, "ok": ok, "detail": detail, "seconds": round(time.perf_counter() - start, 3)})
    ok = all(r["ok"] for r in results)
    label = target.name or "(kubeconfig current context)"
    if args.json:
        print(json.dumps({"target": label, "ok": ok, "checks": results}, indent=2))
    else:
        print(f"target {label}: {'ok' if ok else 'FAILED'}")
        for r in results:
            print(f"  {'ok  ' if r['ok'] else 'FAIL'} {r['check']}: {r['detail']}")
    return 0 if ok else 1
