"""Container pieces that need no engine: ignore rules, content hash, state mapping, errors."""

from __future__ import annotations

import io
import os
import sys
import tarfile

import pytest

import xcore as xm
from xcore import images
from xcore.images.context import from_images
from xcore.model.status import Status
from xlocal.containers import state_from_inspect


def _project(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "main.py").write_text("print(1)\n")
    (root / "requirements.txt").write_text("six\n")
    (root / "big.dat").write_text("ignored")
    (root / ".dockerignore").write_text("*.dat\n")
    return root


def _tag(root) -> str:
    spec = xm.PythonContainer(xm.ModuleName("pkg.main"), str(root), "base:1")
    context = images.python_container_context(spec)
    return images.image_tag(context, images.content_hash(context, {"base:1": "sha256:abc"}))


def test_content_hash_follows_content_not_mtime(tmp_path):
    root = _project(tmp_path)
    first = _tag(root)
    assert first.startswith("xcore/proj:") and len(first.rsplit(":", 1)[1]) == 12
    assert _tag(root) == first
    os.utime(root / "pkg" / "main.py", (1, 1))  # touched: same content
    assert _tag(root) == first
    (root / "big.dat").write_text("changed, but ignored")
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\0")
    assert _tag(root) == first
    (root / "pkg" / "main.py").write_text("print(2)\n")
    second = _tag(root)
    assert second != first
    (root / "pkg" / "main.py").chmod(0o755)
    assert _tag(root) != second


def test_content_hash_depends_on_base_image_and_dockerfile(tmp_path):
    root = _project(tmp_path)
    spec = xm.PythonContainer(xm.ModuleName("pkg.main"), str(root), "base:1")
    context = images.python_container_context(spec)
    one = images.content_hash(context, {"base:1": "sha256:abc"})
    assert images.content_hash(context, {"base:1": "sha256:def"}) != one
    other = images.python_container_context(xm.PythonContainer(xm.CommandList(["echo"]), str(root), "base:1"))
    assert images.content_hash(other, {"base:1": "sha256:abc"}) != one


def test_digest_cache_rereads_touched_files(tmp_path):
    root = _project(tmp_path)
    spec = xm.PythonContainer(xm.ModuleName("pkg.main"), str(root), "base:1")
    cache_file = tmp_path / "digests.json"
    hashes = []
    for change in (None, "touch", "edit"):
        if change == "touch":
            os.utime(root / "pkg" / "main.py", (5, 5))
        if change == "edit":
            (root / "pkg" / "main.py").write_text("print(3)\n")
        context = images.python_container_context(spec)
        hashes.append(images.content_hash(context, {}, images.DigestCache(cache_file)))
    assert hashes[0] == hashes[1] != hashes[2]


def test_generated_dockerfile_and_tar(tmp_path):
    root = _project(tmp_path)
    context = images.python_container_context(xm.PythonContainer(xm.ModuleName("pkg.main"), str(root), "base:1"))
    assert context.dockerfile.splitlines() == [
        "FROM base:1",
        "ENV PYTHONUNBUFFERED=1",
        "COPY proj/requirements.txt /app/requirements.txt",
        "RUN python3 -m pip install --no-cache-dir -r /app/requirements.txt",
        "COPY proj/ /app/",
        "WORKDIR /app",
        'ENTRYPOINT ["python3", "-m", "pkg.main"]',
    ]
    buffer = io.BytesIO()
    images.write_tar(context, buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        names = tar.getnames()
    assert "proj/pkg/main.py" in names and ".xcore/Dockerfile" in names
    assert "proj/big.dat" not in names and "proj/.dockerignore" in names


def test_command_list_entrypoint_passes_args_as_positional_parameters(tmp_path):
    root = _project(tmp_path)
    context = images.python_container_context(
        xm.PythonContainer(xm.CommandList(["cd /app", 'python3 -m pkg.main "$@"']), str(root), "base:1"))
    assert context.entrypoint == ("/bin/sh", "-c", 'cd /app\npython3 -m pkg.main "$@"', "xcore-entrypoint")


def test_missing_module_is_a_packaging_error(tmp_path):
    root = _project(tmp_path)
    with pytest.raises(xm.PackagingError, match="Set path="):
        images.python_container_context(xm.PythonContainer(xm.ModuleName("nothere.main"), str(root), "b"))


@pytest.mark.parametrize(
    ("rules", "path", "excluded"),
    [
        (["*.pyc"], "a.pyc", True),
        (["*.pyc"], "sub/a.pyc", False),
        (["**/*.pyc"], "sub/deep/a.pyc", True),
        (["**/*.pyc"], "a.pyc", True),
        (["build"], "build/x/y.txt", True),
        (["/build"], "build", True),
        (["data", "!data/keep.txt"], "data/keep.txt", False),
        (["data", "!data/keep.txt"], "data/drop.txt", True),
        (["*", "!src"], "src/main.py", False),
        (["doc?.md"], "doc1.md", True),
        (["[a-c].txt"], "b.txt", True),
        (["[!a-c].txt"], "b.txt", False),
        (["# comment", ""], "# comment", False),
    ],
)
def test_dockerignore_rules(rules, path, excluded):
    assert images.IgnoreRules(rules).excluded(path) is excluded


def test_from_images():
    text = "ARG V=1\nFROM base:1 AS build\nRUN x\nFROM --platform=linux/amd64 build\nFROM other:2\nFROM scratch\n"
    assert from_images(text) == ["base:1", "other:2"]


def _inspect(status, code=0, oom=False, error=""):
    return {"Name": "/c", "State": {"Status": status, "ExitCode": code, "OOMKilled": oom, "Error": error,
                                    "StartedAt": "2024-05-01T10:00:00.123456789Z",
                                    "FinishedAt": ("2024-05-01T10:00:02.5Z" if status == "exited"
                                                   else "0001-01-01T00:00:00Z")}}


def test_state_mapping():
    assert state_from_inspect(_inspect("created"), False).status is Status.PENDING
    assert state_from_inspect(_inspect("created"), True).status is Status.CANCELLED
    running = state_from_inspect(_inspect("running"), False)
    assert running.status is Status.RUNNING and running.started_at == pytest.approx(1714557600.123456789)
    done = state_from_inspect(_inspect("exited"), False)
    assert (done.status, done.exit_code) == (Status.COMPLETED, 0)
    assert done.ended_at - done.started_at == pytest.approx(2.376543211)
    assert state_from_inspect(_inspect("exited", 3), False).message == "exit code 3"
    oom = state_from_inspect(_inspect("exited", 137, oom=True), True)
    assert (oom.status, oom.message, oom.exit_code) == (Status.FAILED, "out of memory", 137)
    assert state_from_inspect(_inspect("exited", 143), True).status is Status.CANCELLED
    assert state_from_inspect(_inspect("exited", 0), True).status is Status.COMPLETED
    killed = state_from_inspect(_inspect("exited", 137), False)
    assert (killed.message, killed.exit_code) == ("killed by signal 9 (SIGKILL)", 137)
    gone = state_from_inspect(None, False)
    assert gone.status is Status.FAILED and gone.message.startswith("lost: ")
    assert state_from_inspect(None, True).status is Status.CANCELLED


def test_missing_sdk_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)
    with pytest.raises(images.EngineUnavailableError, match=r"pip install 'xcore-xlocal\[docker\]'"):
        images.engine.import_docker()


def test_unreachable_engine_says_what_to_do(monkeypatch, tmp_path):
    pytest.importorskip("docker")
    url = f"unix://{tmp_path}/nothing.sock"
    monkeypatch.setenv("DOCKER_HOST", url)
    with pytest.raises(images.EngineUnavailableError) as error:
        images.connect()
    assert url in str(error.value) and "DOCKER_HOST" in str(error.value) and "dockerd" in str(error.value)


def _request(executor, executable=None, args=("a",), env=None):
    import xlocal
    from xcore.model.execution import LaunchRequest

    exe = executable or xlocal.LocalContainer(name="demo", image="img:1", entrypoint=["python3", "-m", "m"])
    return LaunchRequest(7, 3, 2, "train/x", exe, executor, list(args), dict(env or {"K": "v=1\nz"}))


def test_create_options_from_requirements_and_docker_options(tmp_path):
    docker = pytest.importorskip("docker")
    import xlocal
    from xlocal.containers import container_name, create_options

    client = docker.DockerClient(base_url=f"unix://{tmp_path}/offline.sock", version="1.41")  # no engine call
    executor = xlocal.Local(
        requirements=xm.JobRequirements(cpu=1.5, memory="1GiB", a100=2),
        docker_options=xlocal.DockerOptions(ports={8080: 18080}, volumes={str(tmp_path): "/data:ro", "cache": "/c"},
                                            network="none", shm_size="1g", user="1000:1000"),
    )
    request = _request(executor)
    name = container_name(request)
    assert name.startswith("xcore-3-2-train-x-")
    options = create_options(client, request, name)
    assert options["command"] == ["a"] and options["entrypoint"] == ["python3", "-m", "m"]
    assert options["environment"] == ["K=v=1\nz"]
    assert options["labels"] == {"xcore.experiment": "3", "xcore.work_unit": "2", "xcore.job": "train/x",
                                 "xcore.job_id": "7", "xcore.managed-by": "xlocal"}
    host = options["host_config"]
    assert host["NanoCpus"] == 1_500_000_000 and host["Memory"] == host["MemorySwap"] == 1 << 30
    assert host["DeviceRequests"] == [
        {"Driver": "", "Count": 2, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}]
    assert host["PortBindings"] == {"8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": "18080"}]}
    assert sorted(host["Binds"]) == sorted([f"{tmp_path}:/data:ro", "cache:/c:rw"])
    assert host["NetworkMode"] == "none" and host["Init"] is True and "AutoRemove" not in host


def test_create_options_errors_say_what_to_do(tmp_path):
    docker = pytest.importorskip("docker")
    import xlocal
    from xlocal.containers import create_options

    client = docker.DockerClient(base_url=f"unix://{tmp_path}/offline.sock", version="1.41")
    with pytest.raises(xm.LaunchError, match="docker exec -it"):
        create_options(client, _request(xlocal.Local(docker_options=xlocal.DockerOptions(interactive=True))), "n")
    with pytest.raises(xm.LaunchError, match="only GPUs"):
        create_options(client, _request(xlocal.Local(requirements=xm.JobRequirements(tpu_v4=8))), "n")
    image_default = xlocal.LocalContainer(name="i", image="img:1")
    assert create_options(client, _request(xlocal.Local(), image_default, args=()), "n")["command"] is None


def test_mount_gcs_path_mounts_home_gcs_like_xmanager(tmp_path, monkeypatch):
    docker = pytest.importorskip("docker")
    import xlocal
    from xlocal.containers import create_options

    client = docker.DockerClient(base_url=f"unix://{tmp_path}/offline.sock", version="1.41")  # no engine call
    monkeypatch.setenv("HOME", str(tmp_path))

    def binds(options):
        created = create_options(client, _request(xlocal.Local(docker_options=options)), "n")
        return created["host_config"].get("Binds", [])

    assert binds(xlocal.DockerOptions()) == []  # no ~/gcs: nothing to mount
    (tmp_path / "gcs").mkdir()
    assert binds(xlocal.DockerOptions()) == [f"{tmp_path}/gcs:/gcs:rw"]
    assert binds(xlocal.DockerOptions(mount_gcs_path=False)) == []
