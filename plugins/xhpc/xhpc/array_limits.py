"""The largest job array a cluster accepts, read from the cluster itself and cached per cluster.

Slurm's ``MaxArraySize`` (``scontrol show config``; indices 0..MaxArraySize-1, so that many
tasks) and SGE's ``max_aj_tasks`` (``qconf -sconf``; 0 means no limit). A fixed guess (Slurm's
default 1001) splits 10,000 tasks into 10 arrays on a cluster that allows 100,001. The query
rides along with the launch's first remote command, so it costs no extra round trip, and runs
again after ``CACHE_SECS``. ``max_array_size`` in clusters.toml still wins.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from xhpc.config import Cluster

CACHE_FILE = "array-limits.json"
CACHE_SECS = 24 * 3600
MARK = "xcore-max-array"
QUERIES = {
    "slurm": "scontrol show config 2>/dev/null | sed -n 's/^MaxArraySize *= *//p'",
    "sge": "qconf -sconf 2>/dev/null | awk '$1 == \"max_aj_tasks\" {print $2}'",
}
NO_LIMIT = 10**9  # SGE's 0


def _key(cluster: Cluster) -> str:
    return f"{cluster.name}|{cluster.scheduler}|{cluster.address}"


def _read(state_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((state_dir / CACHE_FILE).read_text())
    except (OSError, ValueError):
        return {}


def _cached(cluster: Cluster, state_dir: Path) -> int | None:
    entry = _read(state_dir).get(_key(cluster))
    if isinstance(entry, dict) and time.time() - float(entry.get("at", 0)) < CACHE_SECS:
        return int(entry["limit"])
    return None


def query(cluster: Cluster, state_dir: Path) -> str:
    """Shell to append to the launch's first remote command ('' when configured or cached)."""
    if cluster.max_array_size or _cached(cluster, state_dir) is not None or cluster.scheduler not in QUERIES:
        return ""
    return f"; echo {MARK} $({QUERIES[cluster.scheduler]})"


def learn(cluster: Cluster, state_dir: Path, lines: list[str]) -> None:
    """Cache the limit found in the command's output lines (nothing when none was found)."""
    for line in lines:
        if line.startswith(MARK):
            value = line[len(MARK):].strip()
            if not value.isdigit():
                return
            limit = int(value) or NO_LIMIT
            data = _read(state_dir)
            data[_key(cluster)] = {"limit": limit, "at": time.time()}
            tmp = state_dir / f".{CACHE_FILE}.{os.getpid()}.tmp"
            try:
                tmp.write_text(json.dumps(data))
                os.chmod(tmp, 0o600)
                os.replace(tmp, state_dir / CACHE_FILE)
            except OSError:
                pass  # a cache: the next launch asks again
            return


def limit(cluster: Cluster, state_dir: Path) -> int:
    """clusters.toml's ``max_array_size``, else what the cluster said, else the old defaults."""
    if cluster.max_array_size:
        return int(cluster.max_array_size)
    return _cached(cluster, state_dir) or cluster.array_limit
