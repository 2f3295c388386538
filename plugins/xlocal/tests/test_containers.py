"""xlocal containers against a real Docker engine (``scripts/infra/docker.sh`` starts one and
builds the base image ``xcore-python:3.11``; no registry is needed).

One image is built per session (with ``six`` installed by pip inside the build) and shared;
each test has its own XCORE_HOME. Tests that need no engine are in test_containers_unit.py.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import xcore as xm
import xcore.hooks.host
from xcore.testing import require_service

docker = pytest.importorskip("docker", reason="pip install 'xcore-xlocal[docker]'")

import xlocal  # noqa: E402  (after the importorskip above)
from xcore import images  # noqa: E402

BASE_IMAGE = os.environ.get("XLOCAL_TEST_BASE_IMAGE", "xcore-python:3.11")
NASTY = ["a b", "it's", '"q"', "$HOME", "`id`", "back\\slash", "new\nline", "ünï €", ""]

APP = '''\
import json, os, sys, time

import six


def main(args):
    if args[:1] == ["--sleep"]:
        print("sleeping", flush=True)
        time.sleep(float(args[1]))
    elif args[:1] == ["--exit"]:
        print("about to exit", int(args[1]), flush=True)
        sys.exit(int(args[1]))
    elif args[:1] == ["--alloc-mb"]:
        blocks = []
        for _ in range(int(args[1])):
            blocks.append(b"\\x01" * (1 << 20))
        print("allocated", len(blocks), flush=True)
    elif args[:1] == ["--write"]:
        with open(args[1], "w") as handle:
            handle.write(args[2])
    env = {k: v for k, v in os.environ.items() if k.startswith("XT_")}
    print("RESULT " + json.dumps({"argv": args, "env": env, "six": six.__version__}))


if __name__ == "__main__":
    main(sys.argv[1:])
'''


def _engine_up() -> bool:
    try:
        client = images.connect()
        client.ping()
        client.api.inspect_image(BASE_IMAGE)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        images.engine.forget()
        return False


@pytest.fixture(scope="session")
def engine():
    require_service("dockerd", _engine_up,
                    f"run `sudo bash scripts/infra/docker.sh` (starts dockerd, builds {BASE_IMAGE})")
    return images.connect()


@pytest.fixture(scope="session")
def project(tmp_path_factory) -> Path:
    """A small Python project with a pip dependency; a random file makes its image new each session."""
    root = tmp_path_factory.mktemp("containers") / "demo_project"
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "main.py").write_text(APP)
    token = secrets.token_hex(8)
    # The token makes the pip layer new each session, so pip really runs inside the build.
    (root / "requirements.txt").write_text(f"six  # session {token}\n")
    (root / "session.txt").write_text(token)
    (root / "data.bin").write_bytes(b"x" * 1000)
    (root / ".dockerignore").write_text("data.bin\n")
    return root


def _spec(project: Path, entrypoint=None) -> xm.PythonContainer:
    return xm.PythonContainer(entrypoint or xm.ModuleName("app.main"), str(project), BASE_IMAGE)


@pytest.fixture(scope="session")
def session_images(engine):
    """Image tags or ids the tests built, removed at the end of the session."""
    made: list[str] = []
    yield made
    for image in reversed(made):
        try:
            engine.api.remove_image(image, force=True)
        except docker.errors.APIError:
            pass


@pytest.fixture(scope="session")
def built(engine, project, tmp_path_factory, session_images) -> images.BuiltImage:
    """The session's image, built once with the real build path (pip install inside)."""
    context = images.python_container_context(_spec(project))
    result = images.ensure_image(engine, context, cache_dir=tmp_path_factory.mktemp("image-cache"))
    session_images.append(result.tag)
    assert result.built and result.tag.startswith("xcore/demo_project:")
    return result


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XCORE_QUIET", "1")
    monkeypatch.setenv("XCORE_BATCH_WINDOW", "0.01")
    xcore.hooks.host.reset_host()
    yield tmp_path / "home"
    xcore.hooks.host.reset_host()


@pytest.fixture
def cleanup(engine, home):
    """Remove the containers a test started: those its own store has handles for (experiment
    ids repeat across the private stores of tests running at the same time on one engine, so
    the labels alone would also remove other runs' containers)."""
    from xcore.launch.registry import open_store

    experiments: list[int] = []
    yield experiments
    store = open_store()
    mine = {job.handle.get("container_id") for e in experiments for unit in store.work_units(e)
            for job in unit.jobs if job.handle}
    for container in engine.api.containers(all=True, filters={"label": "xcore.managed-by=xlocal"}):
        if container["Id"] in mine:
            engine.api.remove_container(container["Id"], force=True)


def _package(experiment, spec, **kwargs):
    [exe] = experiment.package([xm.Packageable(spec, xlocal.LocalSpec(), **kwargs)])
    return exe


def _handle(job):
    return xcore.hooks.host.get_host().serializer.load(job.handle)


def _logs(job, follow=False) -> str:
    return "".join(xcore.hooks.host.get_host().job_logs(job.handle_kind, _handle(job), follow))


def _result(job) -> dict:
    lines = [line for line in _logs(job).splitlines() if line.startswith("RESULT ")]
    assert lines, _logs(job)
    return json.loads(lines[-1][len("RESULT "):])


def _wait_running(unit, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = unit.get_status()
        if status.status is xm.Status.RUNNING:
            return
        assert status.is_active, status
        time.sleep(0.1)
    raise AssertionError("the container did not start")


def _no_build(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("an image build ran although nothing changed")

    monkeypatch.setattr("xcore.images.build._run_build", fail)


# -- build and run ---------------------------------------------------------------------------


def test_build_installs_dependency_and_relaunch_does_not_rebuild(engine, built, project, home, cleanup, monkeypatch):
    info = engine.api.inspect_image(built.tag)
    assert info["Config"]["Labels"][images.build.HASH_LABEL].startswith(built.tag.rsplit(":", 1)[1])
    _no_build(monkeypatch)
    os.utime(project / "app" / "main.py")  # touched, unchanged
    (project / "data.bin").write_bytes(b"y" * 1000)  # changed but .dockerignored
    started = time.monotonic()
    with xm.create_experiment("relaunch") as experiment:
        cleanup.append(experiment.experiment_id)
        exe = _package(experiment, _spec(project))
        packaging = time.monotonic() - started
        assert isinstance(exe, xlocal.LocalContainer)
        assert exe.image == built.tag and exe.image_id == built.image_id
        assert exe.entrypoint == ["python3", "-m", "app.main"]
        experiment.add(xm.Job(exe, xlocal.Local()))
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.status is xm.Status.COMPLETED, job.message
    assert _result(job)["six"]  # installed by pip inside the build
    assert packaging < 2.0


def test_sweep_of_containers(engine, built, project, home, cleanup):
    with xm.create_experiment("sweep") as experiment:
        cleanup.append(experiment.experiment_id)
        exe = _package(experiment, _spec(project), env_vars={"XT_BASE": "exe"})
        for lr in (0.1, 0.01, 0.001, 0.0001):
            experiment.add(xm.Job(exe, xlocal.Local(), args={"lr": lr}, env_vars={"XT_LR": str(lr)}))
    jobs = experiment.wait_until_complete(timeout=90)
    assert [j.status for j in jobs] == [xm.Status.COMPLETED] * 4, [j.message for j in jobs]
    results = sorted((_result(j) for j in jobs), key=lambda r: r["argv"])
    assert [r["argv"] for r in results] == [["--lr=0.0001"], ["--lr=0.001"], ["--lr=0.01"], ["--lr=0.1"]]
    assert all(r["env"]["XT_BASE"] == "exe" and r["env"]["XT_LR"] in r["argv"][0] for r in results)
    assert all(j.exit_code == 0 and j.started_at and j.ended_at >= j.started_at for j in jobs)
    # names and labels tie each container to its experiment, unit and job; nothing auto-removes them
    for job in jobs:
        handle = _handle(job)
        info = engine.api.inspect_container(handle.container_id)
        labels = info["Config"]["Labels"]
        assert labels["xcore.experiment"] == str(experiment.experiment_id)
        assert labels["xcore.work_unit"] == str(job.work_unit_id)
        assert labels["xcore.job"] == job.name
        assert info["Name"].lstrip("/").startswith(f"xcore-{experiment.experiment_id}-{job.work_unit_id}-")
        assert not info["HostConfig"].get("AutoRemove")


@pytest.mark.parametrize("entrypoint", ["module", "commands"])
def test_arguments_and_env_round_trip_exactly(engine, built, project, home, cleanup, session_images, entrypoint):
    spec = _spec(project) if entrypoint == "module" else _spec(
        project, xm.CommandList(["echo starting", 'exec python3 -m app.main "$@"']))
    with xm.create_experiment("args") as experiment:
        cleanup.append(experiment.experiment_id)
        exe = _package(experiment, spec)
        session_images.append(exe.image)
        experiment.add(xm.Job(exe, xlocal.Local(), args=NASTY, env_vars={"XT_NASTY": "\n".join(NASTY)}))
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.status is xm.Status.COMPLETED, job.message + _logs(job)
    result = _result(job)
    assert result["argv"] == NASTY
    assert result["env"]["XT_NASTY"] == "\n".join(NASTY)


def test_failing_container(engine, built, project, home, cleanup):
    with xm.create_experiment("fail") as experiment:
        cleanup.append(experiment.experiment_id)
        exe = _package(experiment, _spec(project))
        unit = experiment.add(xm.Job(exe, xlocal.Local(), args=["--exit", "3"])).result()
    with pytest.raises(xm.ExperimentUnitFailedError, match="exit code 3"):
        unit.wait_until_complete().result(timeout=60)
    [job] = unit._jobs()
    assert (job.status, job.exit_code, job.message) == (xm.Status.FAILED, 3, "exit code 3")
    assert "about to exit 3" in _logs(job)


def test_out_of_memory_is_reported(engine, built, project, home, cleanup):
    executor = xlocal.Local(requirements=xm.JobRequirements(memory="48MiB"))
    with xm.create_experiment("oom") as experiment:
        cleanup.append(experiment.experiment_id)
        exe = _package(experiment, _spec(project))
        experiment.add(xm.Job(exe, executor, args=["--alloc-mb", "400"]))
    [job] = experiment.wait_until_complete(timeout=60)
    assert (job.status, job.message, job.exit_code) == (xm.Status.FAILED, "out of memory", 137)


def test_limits_volumes_and_network(engine, built, project, home, cleanup, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    executor = xlocal.Local(
        requirements=xm.JobRequirements(cpu=0.5, memory="256MiB"),
        docker_options=xlocal.DockerOptions(volumes={str(shared): "/data"}, network="none"),
    )
    with xm.create_experiment("limits") as experiment:
        cleanup.append(experiment.experiment_id)
        exe = _package(experiment, _spec(project))
        experiment.add(xm.Job(exe, executor, args=["--write", "/data/out.txt", "written ü"]))
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.status is xm.Status.COMPLETED, job.message + _logs(job)
    assert (shared / "out.txt").read_text(encoding="utf-8") == "written ü"
    host_config = engine.api.inspect_container(_handle(job).container_id)["HostConfig"]
    assert host_config["NanoCpus"] == 500_000_000
    assert host_config["Memory"] == 256 * 1024 * 1024
    assert host_config["NetworkMode"] == "none"
    assert host_config["Init"] is True


# -- cancel, status and logs from a later process -------------------------------------------

LATER = textwrap.dedent("""
    import json, sys
    import xcore, xcore.hooks.host
    action, experiment_id = sys.argv[1], int(sys.argv[2])
    experiment = xcore.get_experiment(experiment_id)
    unit = experiment.work_units[1]
    if action == "cancel":
        unit.stop()
    host = xcore.hooks.host.get_host()
    [job] = unit._jobs()
    logs = "".join(host.job_logs(job.handle_kind, host.serializer.load(job.handle), action == "follow"))
    status = unit.get_status()  # after following the logs to the end, the job has ended
    [job] = unit._jobs()
    print(json.dumps({"status": status.status.value, "exit_code": job.exit_code, "logs": logs}))
""")


def _later(action: str, experiment_id: int) -> dict:
    done = subprocess.run([sys.executable, "-c", LATER, action, str(experiment_id)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ), check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cancel_status_and_logs_from_a_later_process(engine, built, project, home, cleanup):
    executor = xlocal.Local(kill_grace_secs=2)
    with xm.create_experiment("cancel") as experiment:
        cleanup.append(experiment.experiment_id)
        exe = _package(experiment, _spec(project))
        unit = experiment.add(xm.Job(exe, executor, args=["--sleep", "300"])).result()
    _wait_running(unit)
    started = time.monotonic()
    later = _later("cancel", experiment.experiment_id)
    assert time.monotonic() - started < 30  # python as the child of init ends on SIGTERM at once
    assert later["status"] == "CANCELLED"
    assert "sleeping" in later["logs"]
    xcore.hooks.host.reset_host()
    status = xm.get_experiment(experiment.experiment_id).work_units[1].get_status()
    assert status.is_cancelled, status


def test_failed_job_seen_from_a_later_process_with_followed_logs(engine, built, project, home, cleanup):
    with xm.create_experiment("later") as experiment:
        cleanup.append(experiment.experiment_id)
        exe = _package(experiment, _spec(project))
        experiment.add(xm.Job(exe, xlocal.Local(), args=["--exit", "5"]))
    later = _later("follow", experiment.experiment_id)  # follows until the container ends
    assert later["logs"].strip() == "about to exit 5"
    assert later["status"] == "FAILED" and later["exit_code"] == 5


# -- other specs and mixed batches ----------------------------------------------------------


def test_existing_image_with_container_spec(engine, home, cleanup):
    with xm.create_experiment("image") as experiment:
        cleanup.append(experiment.experiment_id)
        [exe] = experiment.package([xm.container(xlocal.LocalSpec(), BASE_IMAGE)])
        assert exe.entrypoint is None
        argv = ["python3", "-c", "import sys; print('hello', sys.argv[1:])", "x y"]
        experiment.add(xm.Job(exe, xlocal.Local(), args=argv))
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.status is xm.Status.COMPLETED, job.message
    assert _logs(job) == "hello ['x y']\n"


@pytest.mark.parametrize("argv", [["no-such-binary-xyz", "--flag"], ["sh", "-c", "no-such-binary-xyz --flag"]],
                         ids=["entrypoint", "through-a-shell"])
def test_a_missing_binary_is_reported_as_command_not_found(engine, home, cleanup, argv):
    """Not just "exit code 127" (issue 30): the job's message says the command was not found."""
    with xm.create_experiment("missing binary") as experiment:
        cleanup.append(experiment.experiment_id)
        [exe] = experiment.package([xm.container(xlocal.LocalSpec(), BASE_IMAGE)])
        experiment.add(xm.Job(exe, xlocal.Local(), args=argv))
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.status is xm.Status.FAILED
    assert "not found" in job.message and "no-such-binary-xyz" in job.message, job.message


def test_missing_image_says_what_to_do(engine, home):
    with xm.create_experiment("missing") as experiment, \
            pytest.raises(xm.PackagingError, match="could not be pulled"):
        experiment.package([xm.container(xlocal.LocalSpec(), "xcore-test/does-not-exist:1")])


def test_dockerfile_spec_honours_dockerignore(engine, home, cleanup, tmp_path):
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nCOPY . /ctx\nENTRYPOINT [\"sh\", \"-c\", \"ls /ctx; echo args: \\\"$@\\\"\", \"sh\"]\n"
    )
    (context / "keep.txt").write_text(secrets.token_hex(4))
    (context / "secret.key").write_text("no")
    (context / ".dockerignore").write_text("*.key\n")
    with xm.create_experiment("dockerfile") as experiment:
        cleanup.append(experiment.experiment_id)
        [exe] = experiment.package([xm.dockerfile_container(xlocal.LocalSpec(), str(context))])
        assert exe.image.startswith("xcore/ctx:")
        experiment.add(xm.Job(exe, xlocal.Local(), args=["one", "two"]))
    [job] = experiment.wait_until_complete(timeout=60)
    assert job.status is xm.Status.COMPLETED, job.message
    out = _logs(job)
    assert "keep.txt" in out and "secret.key" not in out and "args: one two" in out
    engine.api.remove_image(exe.image, force=True)


def test_failed_build_shows_the_failing_step(engine, home, tmp_path, session_images):
    project = tmp_path / "broken"
    project.mkdir()
    (project / "main.py").write_text("print('hi')\n")
    spec = xm.PythonContainer(
        xm.ModuleName("main"), str(project), BASE_IMAGE,
        docker_instructions=["COPY broken/ /app", "RUN echo first-line-out && echo boom-output-line >&2 && exit 4"],
    )
    dangling = {i["Id"] for i in engine.api.images(filters={"dangling": True})}
    with xm.create_experiment("broken") as experiment, pytest.raises(images.BuildError) as error:
        _package(experiment, spec)
    # the layers of the steps that worked stay as build cache, like `docker build`; tidy them
    session_images.extend(i["Id"] for i in engine.api.images(filters={"dangling": True}) if i["Id"] not in dangling)
    message = str(error.value)
    assert re.search(r"failed at step 4/\d+ \(RUN echo first-line-out", message), message
    assert "first-line-out\n" in message
    assert "boom-output-line" in message and "returned a non-zero code: 4" in message


def test_mixed_batch_of_processes_and_containers(engine, built, project, home, cleanup):
    with xm.create_experiment("mixed") as experiment:
        cleanup.append(experiment.experiment_id)
        container = _package(experiment, _spec(project))
        [process] = experiment.package([xm.binary(xlocal.LocalSpec(), "true")])
        experiment.add(xm.JobGroup(box=xm.Job(container, xlocal.Local(), args=["x"]),
                                   proc=xm.Job(process, xlocal.Local())))
    jobs = experiment.wait_until_complete(timeout=60)
    assert {j.name: j.handle_kind for j in jobs} == {"box": "xlocal.ContainerHandle", "proc": "xlocal.ProcessHandle"}
    assert all(j.status is xm.Status.COMPLETED for j in jobs), [j.message for j in jobs]


def test_start_failure_is_a_failed_job_not_a_lost_one(engine, built, project, home, cleanup, tmp_path, monkeypatch):
    # One batch for both, however slow the machine: Local hands its first recorded jobs over at
    # once, and a batch of only the bad container would fail as a whole ("No container could be started").
    monkeypatch.setenv("XCORE_BATCH_MAX_AGE", "60")
    good = xlocal.Local()
    bad = xlocal.Local(docker_options=xlocal.DockerOptions(network="xcore-no-such-network"))
    # the container that cannot start is a LaunchFailure: its add() fails, the other job runs
    with pytest.raises(xm.ExperimentUnitError, match="failed to launch: cannot start the container"):
        with xm.create_experiment("startfail") as experiment:
            cleanup.append(experiment.experiment_id)
            exe = _package(experiment, _spec(project))
            experiment.add(xm.Job(exe, good))
            experiment.add(xm.Job(exe, bad))
    jobs = sorted(experiment.wait_until_complete(timeout=60), key=lambda j: j.work_unit_id)
    assert jobs[0].status is xm.Status.COMPLETED
    assert jobs[1].status is xm.Status.FAILED and "xcore-no-such-network" in jobs[1].message


def test_shell_into_a_running_container(engine, built, project, home, cleanup):
    """``xcore shell`` execs into the container: one command with its arguments as typed, and a
    session typed at a terminal; once the container is gone, a clear message."""
    from xcore.testing.terminal import converse

    with xm.create_experiment("shell") as experiment:
        cleanup.append(experiment.experiment_id)
        exe = _package(experiment, _spec(project), env_vars={"XT_WORD": "two words; $HOME"})
        unit = experiment.add(xm.Job(exe, xlocal.Local(kill_grace_secs=1), args=["--sleep", "300"])).result()
    _wait_running(unit)
    [job] = experiment._all_jobs()
    target = f"{experiment.experiment_id}/1"
    cli = [sys.executable, "-m", "xcore.cli.main", "shell", target]
    done = subprocess.run([*cli, "--", "sh", "-c", 'printf "%s|" "$XT_WORD" "$@"', "_", "a b", "$(id)"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ), check=False)
    assert (done.returncode, done.stdout) == (0, "two words; $HOME|a b|$(id)|"), done.stderr
    output, code = converse(cli, "hostname; exit 5\n")
    assert code == 5, output
    assert job.handle["container_id"][:12] in output  # a container's host name is its short id
    _later("cancel", experiment.experiment_id)
    ended = subprocess.run([*cli, "--", "true"], capture_output=True, text=True, timeout=120, env=dict(os.environ),
                           check=False)
    assert ended.returncode == 1 and "has ended (CANCELLED" in ended.stderr, ended.stderr
