"""An SSH server that accepts the connection and never answers: a clear error in bounded time."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

TIMEOUT = 2.0


@pytest.fixture
def hung_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def _configure(xcore_env: Path, port: int) -> None:
    (xcore_env / "config" / "clusters.toml").write_text(
        f'[clusters.hung]\nscheduler = "slurm"\nhost = "127.0.0.1"\nport = {port}\nuser = "nobody"\n'
        f'staging = "/tmp/never"\nconnect_timeout = {TIMEOUT}\n'
    )


def _xcore(*argv: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "xcore.cli.main", *argv], capture_output=True, text=True,
                            timeout=120, check=False)
    return result, time.monotonic() - started


def test_cluster_check_says_the_server_did_not_answer(xcore_env: Path, hung_server: int) -> None:
    _configure(xcore_env, hung_server)
    result, seconds = _xcore("cluster", "check", "hung")
    text = result.stdout + result.stderr
    assert result.returncode != 0
    assert "did not answer within 2 s" in text and "connect_timeout" in text, text
    assert "Traceback" not in text
    assert seconds < 2 * TIMEOUT + 5, f"took {seconds:.1f} s"


def test_launch_to_a_hung_server_fails_in_bounded_time(xcore_env: Path, hung_server: int, tmp_path: Path) -> None:
    _configure(xcore_env, hung_server)
    script = tmp_path / "launch.py"
    script.write_text(
        "import xcore as xm\nimport xhpc\n"
        "with xm.create_experiment('hung') as e:\n"
        "    [exe] = e.package([xm.binary(xhpc.Slurm.Spec(), '/bin/true')])\n"
        "    e.add(xm.Job(exe, xhpc.Slurm(cluster='hung')))\n"
    )
    result, seconds = _xcore("launch", str(script))
    text = result.stdout + result.stderr
    assert result.returncode != 0
    assert "did not answer" in text, text
    assert "Traceback" not in text
    assert seconds < 4 * TIMEOUT + 10, f"took {seconds:.1f} s"
