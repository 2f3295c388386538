"""Shared helpers for the xcore benchmarks (standard library only)."""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
XCORE_BIN = str(Path(PYTHON).parent / "xcore")


@contextlib.contextmanager
def temp_home(prefix: str = "xcore-bench-") -> Iterator[Path]:
    """A throw-away XCORE_HOME (never the user's), set in os.environ for this process and children.
    Children also get PYTHONSAFEPATH=1: a `python -c` run from a checkout would otherwise import
    the checkout's xcore instead of the installed one the bench means to measure."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    saved = {k: os.environ.get(k) for k in ("XCORE_HOME", "XCORE_STORE", "XCORE_CONFIG_DIR", "PYTHONSAFEPATH")}
    os.environ["PYTHONSAFEPATH"] = "1"
    os.environ["XCORE_HOME"] = str(path / "home")
    os.environ["XCORE_CONFIG_DIR"] = str(path / "config")
    os.environ.pop("XCORE_STORE", None)
    try:
        yield path
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(path, ignore_errors=True)


def time_subprocess(argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def time_subprocess_cpu(argv: Sequence[str], env: dict[str, str] | None = None,
                        cwd: str | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+system) of one run. On a machine loaded by other work the
    wall time mostly measures waiting for a core; the CPU time is what the command itself costs."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time_subprocess(argv, env, cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"
