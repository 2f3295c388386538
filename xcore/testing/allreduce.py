"""A program for tests of distributed launches: an all-reduce over the variables a backend set.

Run as a script (``python allreduce.py [torch|jax|xcore]``) by every process of a job with
``distributed=xm.Distributed(...)``. With ``torch`` installed and the ``torch`` variables set
it runs ``torch.distributed`` (gloo, CPU): ``init_process_group(init_method="env://")`` and an
``all_reduce`` of ``rank + 1``; with ``jax`` installed and the ``jax`` variables set,
``jax.distributed.initialize()`` and an all-gather. Without them it does the same rendezvous by hand over TCP,
reading the same variables (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``; for jax
``JAX_COORDINATOR_ADDRESS``, ``JAX_PROCESS_ID``, ``JAX_NUM_PROCESSES``; ``xcore`` reads the
``XCORE_*`` names), so a test proves the processes found each other from those alone. Every
process prints ``allreduce rank=R world=W sum=S via=torch|jax|tcp`` and exits 0 when S is
W*(W+1)/2. It imports nothing of xcore: it runs where only Python is (a cluster node).

``expected_via`` tells a test which ``via=`` the program must print here: CI installs torch
and jax (``scripts/test.sh``), so there the torch run must really be ``torch.distributed``.
"""

from __future__ import annotations

import os
import socket
import sys
import time

TIMEOUT_SECS = 120.0  # a peer that never comes fails the job instead of hanging it


def _coordinates(kind: str) -> tuple[str, int, int, int]:
    env = os.environ
    if kind == "torch":
        return env["MASTER_ADDR"], int(env["MASTER_PORT"]), int(env["RANK"]), int(env["WORLD_SIZE"])
    if kind == "jax":
        host, _, port = env["JAX_COORDINATOR_ADDRESS"].rpartition(":")
        return host, int(port), int(env["JAX_PROCESS_ID"]), int(env["JAX_NUM_PROCESSES"])
    host, _, port = env["XCORE_COORDINATOR"].rpartition(":")
    return host, int(port), int(env["XCORE_RANK"]), int(env["XCORE_WORLD_SIZE"])


def _recv_int(conn: socket.socket) -> int:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(64)
        if not chunk:
            raise ConnectionError("peer closed the connection")
        data += chunk
    return int(data)


def tcp_allreduce(host: str, port: int, rank: int, world: int, value: int) -> int:
    """Rank 0 listens on the coordinator's port, adds every rank's value and sends the sum back."""
    deadline = time.monotonic() + TIMEOUT_SECS
    if rank == 0:
        with socket.create_server((host, port)) as server:
            server.settimeout(TIMEOUT_SECS)
            peers = [server.accept()[0] for _ in range(world - 1)]
            total = value + sum(_recv_int(peer) for peer in peers)
            for peer in peers:
                peer.sendall(f"{total}\n".encode())
                peer.close()
            return total
    while True:  # the coordinator may not listen yet
        try:
            conn = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with conn:
        conn.settimeout(TIMEOUT_SECS)
        conn.sendall(f"{value}\n".encode())
        return _recv_int(conn)


def torch_allreduce(rank: int, world: int, value: int) -> int:
    import datetime

    import torch  # type: ignore[import-not-found, unused-ignore]
    import torch.distributed as dist  # type: ignore[import-not-found, unused-ignore]

    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=TIMEOUT_SECS))
    tensor = torch.tensor([value])
    dist.all_reduce(tensor)
    dist.destroy_process_group()
    return int(tensor.item())


def jax_allreduce(rank: int, world: int, value: int) -> int:
    """``jax.distributed.initialize()`` reads the coordinator's address from the environment;
    the process count and id are passed as docs/gangs.md says."""
    import jax  # type: ignore[import-not-found, unused-ignore]
    import jax.numpy as jnp  # type: ignore[import-not-found, unused-ignore]
    from jax.experimental import multihost_utils  # type: ignore[import-not-found, unused-ignore]

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(num_processes=world, process_id=rank, initialization_timeout=int(TIMEOUT_SECS))
    gathered = multihost_utils.process_allgather(jnp.array([value]))
    jax.distributed.shutdown()
    return int(gathered.sum())


def main(argv: list[str]) -> int:
    kind = argv[0] if argv else "torch"
    host, port, rank, world = _coordinates(kind)
    via = kind if kind in ("torch", "jax") and _has(kind) else "tcp"
    if via == "torch":
        total = torch_allreduce(rank, world, rank + 1)
    elif via == "jax":
        total = jax_allreduce(rank, world, rank + 1)
    else:
        total = tcp_allreduce(host, port, rank, world, rank + 1)
    # One write: the processes share one log, and under PYTHONUNBUFFERED print() writes the
    # line and its newline apart, so two processes' lines could mix.
    os.write(1, f"allreduce rank={rank} world={world} sum={total} via={via}\n".encode())
    return 0 if total == world * (world + 1) // 2 else 1


INSTALL = "scripts/test.sh installs torch==2.13.0 (the CPU wheel) and jax==0.10.2 jaxlib==0.10.2"


def expected_via(kind: str) -> str:
    """For a test of ``allreduce.py kind``: the ``via=`` each process must print. A missing
    torch or jax fails the test in CI (``XCORE_REQUIRE_INFRA=1``) and skips it, with the
    reason, elsewhere: the TCP fallback must never pass for the framework unnoticed."""
    if kind in ("torch", "jax"):
        from xcore.testing import require_module

        require_module(kind, INSTALL)
        return kind
    return "tcp"


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
