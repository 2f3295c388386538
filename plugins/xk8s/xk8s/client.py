"""The ``kubernetes`` client, imported only here and only when a hook needs it.

Lists are read as raw JSON (``_preload_content=False``): turning 1,000 pods into model
objects costs seconds; the fields status needs are a few dict lookups.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from xcore import plugin as xp

#: API calls made by this process, by kind (``create_job``, ``list_pods``, ...): benchmarks read it.
CALLS: dict[str, int] = {}


def count(name: str) -> None:
    CALLS[name] = CALLS.get(name, 0) + 1


def api_client(context: str | None) -> Any:
    """A client for ``context`` of the kubeconfig that ``KUBECONFIG`` names now (the client
    library reads the variable once, at import)."""
    return _api_client(context, os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config"))




@functools.cache
def _api_client(context: str | None, kubeconfig: str) -> Any:
    from kubernetes import config

    try:
        return config.new_client_from_config(config_file=kubeconfig, context=context)
    except config.ConfigException as exc:
        where = f"context {context!r}" if context else "the current context"
        raise xp.ConfigurationError(f"xk8s: cannot load {where} from kubeconfig: {exc}. Set KUBECONFIG "
                                    "or the target's context (xcore k8s check).") from None


api_client.cache_clear = lambda: _api_client.cache_clear()  # type: ignore[attr-defined]


def batch(context: str | None) -> Any:
    from kubernetes import client

    return client.BatchV1Api(api_client(context))


def core(context: str | None) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api_client(context))


def custom(context: str | None) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(api_client(context))


def api_exception() -> Any:  # kubernetes.client.exceptions.ApiException, imported lazily
    from kubernetes.client.exceptions import ApiException

    return ApiException


def raw_list(method: Any, namespace: str, selector: str, name: str) -> list[dict[str, Any]]:
    """One LIST call, items as plain dicts."""
    count(name)
    response = method(namespace, label_selector=selector, _preload_content=False)
    return json.loads(response.data).get("items") or []


def describe(exc: Exception) -> str:
    """A one-line reason from an ApiException (its Status message) or any error."""
    body = getattr(exc, "body", None)
    if body:
        try:
            return f"{json.loads(body).get('message')} (HTTP {getattr(exc, 'status', '?')})"
        except (ValueError, AttributeError):
            pass
    reason = getattr(exc, "reason", None)
    status = getattr(exc, "status", None)
    return f"{reason} (HTTP {status})" if reason and status else str(exc).splitlines()[0]
