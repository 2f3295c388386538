"""A fake backend plugin: deterministic, controllable, no service needed.

Register it with ``xcore.testing.plugin_host({"fake": "xcore.testing.fake"})`` (it has no
entry point, so it never appears in a user's ``xcore plugins``). It implements every
execution hook through the public plugin API, so it doubles as a reference executor:

- ``FakeExecutor()`` runs each job to completion *while it is launched* (synchronously, argv
  as a list, the launcher's environment plus the request's), writing its output to a log;
  the job then reads COMPLETED or FAILED by the one exit-code convention.
- ``FakeExecutor(hold=True)`` does not run anything: the job reads RUNNING until a test
  moves it with ``set_state``/``write_output`` or cancels it.
- ``FakeExecutor(fail_launch="reason")`` returns ``LaunchFailure(reason)`` for its jobs.
- ``FakeExecutor(pause_after_launch=path)`` touches ``path`` once its batch reached the
  backend and then waits (up to a minute, or until ``path + ".release"`` exists) before
  returning: kill the launcher then to leave submitted but unrecorded jobs, which a later
  command adopts (``xcore_adopt``), or act while the launch is under way.
- ``forget(handle)`` makes the backend forget a job (it then reads ``lost: ...``).
- ``preempt(handle)`` ends a job as the scheduler taking its node back (FAILED, class
  ``preempted``); ``set_state(..., failure=...)`` reports any failure class. The fake never
  retries by itself: a failed job whose policy retries it is relaunched by the core's
  observers (``xcore.runtime.relaunch``), as a Vertex CustomJob is.
- Jobs get ``XCORE_ATTEMPT`` and ``XCORE_CHECKPOINT_DIR`` (under the state directory), and
  ``xcore_job_env`` answers their real environment from the record.
- ``set_unreachable("reason")`` puts the whole backend out of reach (its status hook raises
  ``BackendUnavailableError``) until ``set_unreachable(None)``.

State lives in one JSON file per job in the plugin's state directory, so status, cancel and
logs work from any process, exactly as for a real backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from xcore.plugin import (
    BackendUnavailableError,
    Binary,
    Executable,
    Executor,
    ExecutorSpec,
    JobHandle,
    JobState,
    KindRegistrar,
    LaunchContext,
    LaunchFailure,
    LaunchRequest,
    Packageable,
    PackagingContext,
    PackagingError,
    PythonModule,
    Status,
    atomic_write,
    attempt_env,
    cancel_requested,
    checkpoint_dir,
    exit_state,
    follow_file,
    hookimpl,
    lost_state,
    mark_cancelled,
    private_dir,
)

XCORE_PLUGIN_API = "1.0"

#: Sizes of the batches ``xcore_launch`` received in this process, in order.
LAUNCH_BATCHES: list[int] = []


@attrs.frozen
class FakeSpec(ExecutorSpec):
    """The fake executor's spec, for ``experiment.package``."""


@attrs.define(kw_only=True)
class FakeExecutor(Executor):
    """``hold``: never run, stay RUNNING; ``fail_launch``: refuse each job with this reason;
    ``pause_after_launch``: a file to touch once the batch was submitted, before returning."""

    Spec: ClassVar[type[ExecutorSpec]] = FakeSpec
    hold: bool = False
    fail_launch: str = ""
    pause_after_launch: str = ""


@attrs.define(kw_only=True)
class FakeExecutable(Executable):
    command: list[str]
    cwd: str | None = None


@attrs.define
class FakeHandle(JobHandle):
    """The job's record file; ``log_path`` is its output."""

    record: str


@hookimpl
def xcore_register_kinds(registry: KindRegistrar) -> None:
    for cls in (FakeExecutor, FakeSpec, FakeExecutable, FakeHandle):
        registry.add(f"fake.{cls.__name__}", cls)


@hookimpl
def xcore_package(packageable: Packageable, context: PackagingContext) -> FakeExecutable:
    spec = packageable.executable_spec
    if isinstance(spec, PythonModule):
        project = str(Path(spec.path).expanduser().resolve())
        return FakeExecutable(name=spec.name, command=[sys.executable, "-m", spec.module], cwd=project,
                              env_vars={"PYTHONPATH": project})
    if isinstance(spec, Binary):
        return FakeExecutable(name=spec.name, command=[spec.path])
    raise PackagingError(f"fake: cannot run {type(spec).__name__}; use xm.python_module or xm.binary.")


@hookimpl
def xcore_launch(executor_kind: str, requests: Sequence[LaunchRequest],
                 context: LaunchContext) -> list[FakeHandle | LaunchFailure]:
    LAUNCH_BATCHES.append(len(requests))
    jobs = context.state_dir / "jobs"
    results: list[FakeHandle | LaunchFailure] = []
    for request in requests:
        executor: FakeExecutor = request.executor  # type: ignore[assignment]
        if executor.fail_launch:
            results.append(LaunchFailure(executor.fail_launch))
            continue
        stem = jobs / f"{request.full_name}-{uuid.uuid4().hex[:8]}"
        handle = FakeHandle(str(stem) + ".json", log_path=str(stem) + ".log")
        record: dict[str, Any] = {"job_id": request.job_id, "argv": request.args, "env": request.env,
                                  "status": "RUNNING", "message": "held", "exit_code": None,
                                  "attempt": request.attempt}
        atomic_write(handle.log_path or "", b"")
        if not executor.hold:
            record.update(_run(request, handle, context))
        atomic_write(handle.record, json.dumps(record))
        results.append(handle)
    pauses = {marker for r in requests if (marker := getattr(r.executor, "pause_after_launch", ""))}
    for marker in pauses:  # submitted, not yet recorded: the moment a killed launcher leaves behind
        atomic_write(marker, "submitted\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not os.path.exists(marker + ".release"):
            time.sleep(0.05)
    return results


@hookimpl
def xcore_adopt(executor_kind: str, requests: Sequence[LaunchRequest],
                context: LaunchContext) -> list[FakeHandle | None]:
    """Each job's record names its job id and attempt: the submitted ones are found by scanning them."""
    wanted = {request.job_id: request.attempt for request in requests}
    found: dict[int, FakeHandle] = {}
    for record in (context.state_dir / "jobs").glob("*.json"):
        try:
            data = json.loads(record.read_text())
            job_id = data.get("job_id")
        except (OSError, ValueError):
            continue
        if job_id in wanted and data.get("attempt", 1) == wanted[job_id]:  # a relaunch: that attempt's record
            found[job_id] = FakeHandle(str(record), log_path=str(record.with_suffix(".log")))
    return [found.get(request.job_id) for request in requests]


def _run(request: LaunchRequest, handle: FakeHandle, context: LaunchContext) -> dict[str, Any]:
    executable: FakeExecutable = request.executable  # type: ignore[assignment]
    checkpoints = checkpoint_dir(context.state_dir, request.experiment_id, request.work_unit_id)
    private_dir(checkpoints)
    env = {**os.environ, **request.env, **attempt_env(request.attempt, checkpoints)}
    with open(handle.log_path or "", "wb") as log:
        code = subprocess.run([*executable.command, *request.args], env=env,
                              cwd=executable.cwd, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    state = exit_state(code)
    return {"status": state.status.value, "message": state.message, "exit_code": state.exit_code,
            "failure": state.failure}


def _read(handle: FakeHandle) -> dict[str, Any] | None:
    try:
        return dict(json.loads(Path(handle.record).read_text()))
    except FileNotFoundError:
        return None


@hookimpl
def xcore_job_states(handle_kind: str, handles: Sequence[FakeHandle]) -> list[JobState]:
    outage = _outage_file()
    if outage.exists():
        raise BackendUnavailableError(f"fake: {outage.read_text()}")
    states = []
    for handle in handles:
        record = _read(handle)
        if record is None:
            states.append(lost_state("the fake backend has no record of this job"))
        else:
            status = Status(record["status"])
            failure = record.get("failure") or ("error" if status is Status.FAILED else None)
            states.append(JobState(status, record["message"], record["exit_code"], failure=failure))
    return states


@hookimpl
def xcore_wait_for_change(handle_kind: str, handles: Sequence[FakeHandle], timeout: float) -> bool:
    """Until some job's record is rewritten (looked at every 10 ms), at most ``timeout`` s."""

    def stamps() -> list[int | None]:
        return [_mtime(handle.record) for handle in handles]

    before, deadline = stamps(), time.monotonic() + timeout
    while stamps() == before and time.monotonic() < deadline:
        time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))
    return True


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return None


@hookimpl
def xcore_cancel(handle_kind: str, handles: Sequence[FakeHandle]) -> bool:
    for handle in handles:
        mark_cancelled(handle.record + ".cancel")
        record = _read(handle)
        if record is not None and Status(record["status"]).is_active:
            record.update(status="CANCELLED", message="cancelled", exit_code=None)
            atomic_write(handle.record, json.dumps(record))
    return True


@hookimpl
def xcore_job_logs(handle_kind: str, handle: FakeHandle, follow: bool) -> Iterator[str]:
    def finished() -> bool:
        record = _read(handle)
        return record is None or Status(record["status"]).is_terminal

    return follow_file(handle.log_path or "", follow=follow, finished=finished, poll_secs=0.05)


@hookimpl
def xcore_job_env(handle_kind: str, handle: FakeHandle) -> dict[str, str] | None:
    """The job's real environment, from its (0600) record; None once the backend forgot it."""
    record = _read(handle)
    return None if record is None else dict(record.get("env", {}))


@hookimpl
def xcore_job_tracking(job: Any) -> Any:
    """A link per job, as a tracker plugin adds (shown by ``xcore show`` and ``xcore ui``)."""
    from xcore.model.tracking import JobTracking

    return JobTracking(links={"fake": f"https://tracker.invalid/{job.run_name}"})


@hookimpl
def xcore_add_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser("fake-jobs", help="list the fake backend's job records (tests only)")
    parser.set_defaults(func=_list_jobs)


def _list_jobs(args: Any) -> int:
    from xcore.plugin import plugin_state_dir

    for record in sorted((plugin_state_dir("fake") / "jobs").glob("*.json")):
        print(record.name)
    return 0


# -- control, for tests ------------------------------------------------------------------


def _outage_file() -> Path:
    from xcore.plugin import plugin_state_dir

    return plugin_state_dir("fake") / "unreachable"


def set_unreachable(reason: str | None) -> None:
    """Put the backend out of reach, as a cluster whose network is down (None: back again)."""
    if reason is None:
        _outage_file().unlink(missing_ok=True)
    else:
        atomic_write(_outage_file(), reason)


def set_state(handle: FakeHandle, status: Status, message: str = "", exit_code: int | None = None,
              failure: str | None = None) -> None:
    """Move a job to ``status``, FAILED ones with failure class ``failure`` (None reads
    ``error``)."""
    record = _read(handle)
    if record is None:
        raise FileNotFoundError(f"fake: job {handle.record} was forgotten")
    record.update(status=status.value, message=message or status.value.lower(), exit_code=exit_code,
                  failure=failure)
    atomic_write(handle.record, json.dumps(record))


def preempt(handle: FakeHandle) -> None:
    """End a job as a scheduler reclaiming its machine does: FAILED, class ``preempted``."""
    set_state(handle, Status.FAILED, "preempted: the machine was reclaimed", failure="preempted")


def write_output(handle: FakeHandle, data: bytes | str) -> None:
    """Append raw output to a job's log (bytes may end inside a UTF-8 character)."""
    with open(handle.log_path or "", "ab") as log:
        log.write(data.encode() if isinstance(data, str) else data)


def forget(handle: JobHandle) -> None:
    """Make the backend forget the job, like a scheduler purging old accounting records."""
    assert isinstance(handle, FakeHandle)
    Path(handle.record).unlink(missing_ok=True)


def was_cancelled(handle: FakeHandle) -> bool:
    return cancel_requested(handle.record + ".cancel")


def received(handle: FakeHandle) -> tuple[list[str], dict[str, str]]:
    """The argv and env the job received."""
    record = _read(handle) or {}
    return list(record.get("argv", [])), dict(record.get("env", {}))
