"""What the ``XCORE_ATTEMPT`` wrapper costs a pod's start (issue 23).

    .venv/bin/python plugins/xk8s/bench/bench_attempt_wrapper.py [--runs 300]

A single job with a ``retry=`` policy starts as ``/bin/sh -c ATTEMPT_SCRIPT xk8s-attempt
PROGRAM ...`` (``xk8s.manifests.attempt_command``). This starts a program directly and through
the wrapper, alternated run by run, with the pod's attempt variables, and prints the medians:
the difference is what the shell and its ``exec`` add to each pod start (a job without a
policy has no wrapper, so nothing).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from xk8s import manifests as mf

ENV = {"PATH": "/usr/bin:/bin", "XK8S_FIRST_ATTEMPT": "1", "XK8S_INDEX_FAILURES": "0",
       "XK8S_INDEX_IGNORED_FAILURES": "2"}


def _once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=ENV, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    runs = parser.parse_args().runs
    for name, program in (("/bin/true", ["/bin/true"]), ("python3 -S -c pass", [sys.executable, "-S", "-c", "pass"])):
        direct, wrapped = [], []
        for _ in range(runs):
            direct.append(_once(program))
            wrapped.append(_once(mf.attempt_command(program)))
        a, b = statistics.median(direct), statistics.median(wrapped)
        print(f"{name}: direct {a * 1e3:.2f} ms, through the wrapper {b * 1e3:.2f} ms: "
              f"+{(b - a) * 1e3:.2f} ms per start ({b / a:.2f}x), medians of {runs} alternated runs")


if __name__ == "__main__":
    main()
