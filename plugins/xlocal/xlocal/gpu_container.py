"""A container that asks for GPUs, run as a runner job: ``python -m xlocal.gpu_container SPEC``.

Containers otherwise start at once on the engine, but devices are held by the runner (a lock
per device, see xlocal.runner) for as long as a job process lives, and chosen when the job
starts. So a GPU container is this small process: the runner starts it once its devices are
free, with their ids in ``CUDA_VISIBLE_DEVICES``; it creates the container with exactly those
devices (``--gpus device=ID,...``), starts it, copies its output to the job's log, and exits
with its exit code. TERM (``xcore cancel``) stops the container first. The container keeps
its name and labels (``docker ps``), and is not removed when it ends, as other containers.

SPEC (a private JSON file written at launch): the engine's URL, the ``create_container``
keyword arguments, and the stop grace in seconds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from xcore.images import connect, import_docker

START_FAILED = 125  # as `docker run` when the container cannot start


def device_request(ids: list[str]) -> dict[str, Any]:
    """The engine's form of ``--gpus device=ID,...``."""
    return {"Driver": "", "Count": 0, "DeviceIDs": ids, "Capabilities": [["gpu"]], "Options": {}}


def main(spec_path: str) -> int:
    with open(spec_path) as file:
        spec = json.load(file)
    docker = import_docker()
    ids = [i for i in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if i]
    create: dict[str, Any] = spec["create"]
    create["host_config"]["DeviceRequests"] = [device_request(ids)]
    client = connect(spec["base_url"])
    name = create["name"]
    created = client.api.create_container(**create)
    container = created["Id"]
    stopping: list[bool] = []

    def stop(signum: int, frame: object) -> None:
        if not stopping:
            stopping.append(True)
            try:
                client.api.stop(container, timeout=max(0, round(spec.get("grace", 5.0)) - 1))
            except docker.errors.APIError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"xcore: container {name} on GPU {','.join(ids)}", flush=True)
    try:
        client.api.start(container)
    except docker.errors.APIError as exc:
        print(f"xcore: cannot start the container: {exc.explanation or exc}", flush=True)
        return START_FAILED
    out = sys.stdout.buffer
    for chunk in client.api.logs(container, stdout=True, stderr=True, stream=True, follow=True):
        out.write(chunk)
        out.flush()
    code = int(client.api.wait(container).get("StatusCode", 1))
    if client.api.inspect_container(container).get("State", {}).get("OOMKilled"):
        print("xcore: out of memory", flush=True)
        return 137
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
