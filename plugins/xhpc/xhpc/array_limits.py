"""The largest job array a cluster accepts, read from the cluster itself and cached per cluster.

Slurm's ``MaxArraySize`` (``scontrol show config``; indices 0..MaxArraySize-1, so that many
tasks; ``max_array_tasks`` in ``SchedulerParameters`` where lower) and SGE's ``max_aj_tasks``
(``qconf -sconf``; 0 means no limit). A fixed guess (Slurm's default 1001) splits 10,000 tasks
into 10 arrays on a cluster that allows 100,001. The query rides along with the launch's first
remote command, so it costs no extra round trip, and runs again after ``CACHE_SECS``, or at once
when the cluster refuses an array within the cached limit (an admin lowered it:
``launch._split_again``). ``max_array_size`` in clusters.toml still wins.
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
    # MaxArraySize, or SchedulerParameters' max_array_tasks where that is lower (both refuse larger arrays)
    "slurm": ("scontrol show config 2>/dev/null | awk '$1 == \"MaxArraySize\" {m = $3} "
              "$1 == \"SchedulerParameters\" && match($3, /max_array_tasks=[0-9]+/) "
              "{t = substr($3, RSTART + 16, RLENGTH - 16)} "
              "END {if (t != \"\" && m != \"\" && t + 0 < m + 0) m = t; print m}'"),
    "sge": "qconf -sconf 2>/dev/null | awk '$1 == \"max_aj_tasks\" {print $2}'",
}
NO_LIMIT = 10**9  # SGE's 0
# What the submit command says when an array has more tasks than the cluster allows.
TOO_LARGE = {
    "slurm": "Invalid job array specification",
    "sge": "job with more than",  # "job rejected: you tried to submit a job with more than N tasks"
}


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
            _write(state_dir, data)
            return


def too_large(cluster: Cluster, error: str) -> bool:
    """True if a submission was refused because the array has more tasks than the cluster allows."""
    marker = TOO_LARGE.get(cluster.scheduler)
    return marker is not None and marker in error


def forget(cluster: Cluster, state_dir: Path) -> None:
    """Drop this cluster's cached limit (the cluster refused an array within it: it is stale)."""
    data = _read(state_dir)
    if data.pop(_key(cluster), None) is not None:
        _write(state_dir, data)


def _write(state_dir: Path, data: dict[str, Any]) -> None:
    """Replace the cache file whole; it is private from its creation."""
    tmp = state_dir / f".{CACHE_FILE}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(data))
        os.replace(tmp, state_dir / CACHE_FILE)
    except OSError:
        pass  # a cache: the next launch asks again


def limit(cluster: Cluster, state_dir: Path) -> int:
    """clusters.toml's ``max_array_size``, else what the cluster said, else the old defaults."""
    if cluster.max_array_size:
        return int(cluster.max_array_size)
    return _cached(cluster, state_dir) or cluster.array_limit
