"""The absolute staging path of each cluster, remembered between launches.

A launch needs it to write job scripts and task files; asking the cluster costs a round
trip. Remembered, the launch sends everything in one command, and that command checks the
path is still right before submitting anything (``launch._guard``), so a stale entry costs
one extra command, never a wrong submission.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from xhpc.config import Cluster

CACHE_FILE = "staging-roots.json"


def _key(cluster: Cluster) -> str:
    return f"{cluster.name}|{cluster.address}|{cluster.staging}"


def _read(state_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((state_dir / CACHE_FILE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write(state_dir: Path, data: dict[str, Any]) -> None:
    tmp = state_dir / f".{CACHE_FILE}.{os.getpid()}.tmp"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data))
        os.chmod(tmp, 0o600)
        os.replace(tmp, state_dir / CACHE_FILE)
    except OSError:
        pass  # a cache: the next launch asks again


def get(cluster: Cluster, state_dir: Path) -> str | None:
    root = _read(state_dir).get(_key(cluster))
    return root if isinstance(root, str) and root.startswith("/") else None


def remember(cluster: Cluster, state_dir: Path, root: str) -> None:
    if get(cluster, state_dir) != root:
        _write(state_dir, {**_read(state_dir), _key(cluster): root})


def forget(cluster: Cluster, state_dir: Path) -> None:
    data = _read(state_dir)
    if data.pop(_key(cluster), None) is not None:
        _write(state_dir, data)
