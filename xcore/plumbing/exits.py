"""One exit-code convention and one wording, for every backend.

- A program that exits with code N: ``exit_code`` N; ``"exit code N"``; COMPLETED when N is 0.
- A program killed by signal S: ``exit_code`` 128 + S (the shell's convention, also Docker's
  and Slurm's ``DerivedExitCode``), message ``"killed by signal 9 (SIGKILL)"``; FAILED, or
  CANCELLED when a cancel was requested. Never a negative exit code.
- A job that was cancelled reads CANCELLED with message ``"cancelled"`` whatever its code,
  unless it had already exited 0 (then it COMPLETED before the cancel reached it).
"""

from __future__ import annotations

import signal

from xcore.model.status import JobState, Status

SIGNAL_BASE = 128


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; the number as text for a signal this platform does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def signal_exit_code(number: int) -> int:
    """The exit code a job killed by signal ``number`` reads as: 128 + number."""
    return SIGNAL_BASE + number


def normalize_exit_code(code: int) -> int:
    """A Python ``returncode`` (negative for a signal) in the one convention (128 + signal)."""
    return signal_exit_code(-code) if code < 0 else code


def describe_exit(code: int | None, *, signalled: bool | None = None) -> str:
    """``"exit code 3"`` or ``"killed by signal 9 (SIGKILL)"``.

    ``code`` is in the one convention (or a negative Python returncode). Codes above 128 are
    read as signals unless ``signalled=False`` says the program itself exited with that code.
    """
    if code is None:
        return "exit code unknown"
    if code < 0:
        code, signalled = normalize_exit_code(code), True
    if signalled is None:
        signalled = SIGNAL_BASE < code < SIGNAL_BASE + 65
    if signalled and code > SIGNAL_BASE:
        number = code - SIGNAL_BASE
        return f"killed by signal {number} ({signal_name(number)})"
    return f"exit code {code}"


def exit_state(code: int | None, *, cancelled: bool = False, signalled: bool | None = None,
               started_at: float | None = None, ended_at: float | None = None) -> JobState:
    """The final ``JobState`` of a job that ended with ``code`` (see the module docstring)."""
    normalized = None if code is None else normalize_exit_code(code)
    if normalized == 0:
        return JobState(Status.COMPLETED, "exit code 0", 0, started_at, ended_at)
    if cancelled:
        return JobState(Status.CANCELLED, "cancelled", normalized, started_at, ended_at)
    return JobState(Status.FAILED, describe_exit(code, signalled=signalled), normalized, started_at, ended_at,
                    failure="error")


def failed_state(failure: str, message: str, *, exit_code: int | None = None, started_at: float | None = None,
                 ended_at: float | None = None, attempt: int | None = None) -> JobState:
    """A FAILED ``JobState`` of class ``failure`` (one of ``xcore.model.status.FAILURE_CLASSES``:
    ``preempted``, ``node_failure``, ``timeout``, ``out_of_memory``, ``error``, ``lost``,
    ``launch``), so the retry policy can tell a preemption from the program's own failure."""
    from xcore.model.status import FAILURE_CLASSES

    if failure not in FAILURE_CLASSES:
        raise ValueError(f"failure class {failure!r} is not one of {', '.join(FAILURE_CLASSES)}")
    return JobState(Status.FAILED, message, None if exit_code is None else normalize_exit_code(exit_code),
                    started_at, ended_at, failure=failure, attempt=attempt)


def lost_state(why: str = "", *, started_at: float | None = None, ended_at: float | None = None) -> JobState:
    """What a job the backend no longer knows reads as: FAILED, ``"lost: <why>"``, no exit code.

    Use it when the backend answered but has no record of the job (purged from the
    scheduler's accounting, container removed, state files deleted). UNKNOWN is only for a
    backend that cannot be asked right now (unreachable host, missing plugin). Pass the times
    you still know (a start kept in the handle): without them the core can only use the time
    it first saw the job, and its duration reads 0.
    """
    return JobState(Status.FAILED, f"lost: {why or 'the backend no longer knows this job'}", None, started_at,
                    ended_at, failure="lost")
