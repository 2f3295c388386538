"""Strict validators for the CRDs xk8s creates or reads: JobSet and Kueue.

The schemas in ``schemas/`` are the CRDs' ``openAPIV3Schema`` as published by
kubernetes-sigs/jobset and kubernetes-sigs/kueue (source, commit and licence in each file's
``$comment``). The API server prunes unknown fields of a CRD object and, with strict field
validation, rejects them; ``strict`` makes jsonschema do the same, so a misspelled field fails.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMAS = Path(__file__).parent / "schemas"
FILES = {  # (apiVersion, kind) -> schema file
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobset-v1alpha2.json",
    ("kueue.x-k8s.io/v1beta1", "Workload"): "kueue-workload-v1beta1.json",
    ("kueue.x-k8s.io/v1beta1", "LocalQueue"): "kueue-localqueue-v1beta1.json",
    ("kueue.x-k8s.io/v1beta1", "ClusterQueue"): "kueue-clusterqueue-v1beta1.json",
    ("kueue.x-k8s.io/v1beta1", "ResourceFlavor"): "kueue-resourceflavor-v1beta1.json",
    ("kueue.x-k8s.io/v1beta1", "WorkloadPriorityClass"): "kueue-workloadpriorityclass-v1beta1.json",
}


def strict(schema: Any) -> Any:
    """Unknown fields are errors, except where the CRD preserves them."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@functools.cache
def validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    name = FILES.get((api_version, kind))
    if name is None:
        raise KeyError(f"no CRD schema for {api_version} {kind}")
    return jsonschema.Draft7Validator(strict(json.loads((SCHEMAS / name).read_text())["schema"]))


def validate(obj: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``obj`` is valid for its CRD."""
    validator(obj.get("apiVersion", ""), obj.get("kind", "")).validate(obj)


def has_schema(obj: dict[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in FILES
