"""Run one job as N local processes: ``JobRequirements(replicas=N)`` and/or ``distributed=``.

The runner starts ``python -m xlocal.replicas SPEC -- argv...`` as the job: it picks a free
port on 127.0.0.1 (unless the ``Distributed`` names one), starts the N processes with their
rank's variables (``xcore.model.distributed``), and exits with the first non-zero exit code;
when one process fails, the others get SIGTERM (a distributed program would wait for its peer
forever). A cancel reaches every process (the runner signals the job's whole tree).

``SPEC`` is JSON: ``{"replicas": N, "distributed": {...} or null}``. The program's argv follows
``--`` untouched.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from xcore.plugin import Distributed, distributed_env

GRACE_SECS = 10.0  # how long the other processes have to stop after one failed


def wrap(argv: Sequence[str], replicas: int, distributed: Distributed | None) -> list[str]:
    """The job's argv when it runs as ``replicas`` processes."""
    spec = {"replicas": replicas, "distributed": distributed.to_dict() if distributed else None}
    return [sys.executable, "-m", "xlocal.replicas", json.dumps(spec), "--", *argv]


def free_port() -> int:
    """A port free on 127.0.0.1 now (the coordinator binds it moments later, as torchrun does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rank_envs(replicas: int, distributed: Distributed | None, port: int) -> list[dict[str, str]]:
    """Each local process's variables (every process on this host: local rank = rank)."""
    workers = [f"127.0.0.1:{port + rank}" for rank in range(replicas)]
    return [distributed_env(distributed, rank=rank, world_size=replicas, coordinator="127.0.0.1", port=port,
                            local_rank=rank, local_world_size=replicas, workers=workers)
            for rank in range(replicas)]


def run(argv: Sequence[str], replicas: int, distributed: Distributed | None) -> int:
    port = distributed.port if distributed is not None and distributed.port else free_port()
    children: list[subprocess.Popen[bytes]] = []

    def stop(signum: int, _frame: Any) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for env in rank_envs(replicas, distributed, port):
        try:
            children.append(subprocess.Popen(list(argv), env={**os.environ, **env}))
        except OSError as exc:
            print(f"xlocal: cannot start {argv[0]!r}: {exc}", file=sys.stderr, flush=True)
            stop(signal.SIGTERM, None)
            return 127
    first_failure = 0
    stopping_since: float | None = None
    while True:
        codes = [child.poll() for child in children]
        failed = [code for code in codes if code not in (None, 0)]
        if failed and not first_failure:
            first_failure = failed[0]
            stopping_since = time.monotonic()
            stop(signal.SIGTERM, None)
        if all(code is not None for code in codes):
            break
        if stopping_since is not None and time.monotonic() - stopping_since > GRACE_SECS:
            stop(signal.SIGKILL, None)
        if stopping_since is not None:  # bounded: a process that ignores SIGTERM gets SIGKILL
            time.sleep(0.1)
            continue
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)  # sleeps until a child ends
        except ChildProcessError:
            break
    code = first_failure
    if code < 0:  # killed by a signal: report it as a shell would
        return 128 - code
    return code


def main(args: Sequence[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m xlocal.replicas SPEC -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    spec = json.loads(args[0])
    distributed = Distributed.from_dict(spec["distributed"]) if spec.get("distributed") else None
    return run(args[2:], int(spec["replicas"]), distributed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
