"""xhpc's `logs -f` must decode its reads incrementally: a multi-byte character split across
two reads of the cluster log comes out whole (issue 7), fixed by following with
``xcore.plugin.follow_bytes``."""

from __future__ import annotations

import re
import types

from xcore.plugin import JobState, Status

TEXT = "naïve ✓ 日本 🎉\n"


def test_xhpc_follow_never_splits_a_character(monkeypatch):
    from xhpc import tracking
    from xhpc.handles import SlurmHandle

    data = TEXT.encode()
    cut = data.index("✓".encode()) + 1  # the first read ends inside the 3-byte character
    reads = iter([data[:cut], data])  # what the log holds at the first and second read

    class Transport:
        def run(self, command):
            offset = int(re.search(r"tail -c \+(\d+)", command).group(1)) - 1
            return types.SimpleNamespace(stdout=next(reads, data)[offset:], returncode=0, err="")

    polls = iter([JobState(Status.RUNNING), JobState(Status.COMPLETED)])
    monkeypatch.setattr(tracking, "_transport", lambda handle: Transport())
    monkeypatch.setattr(tracking, "states", lambda handles: [next(polls, JobState(Status.COMPLETED))])
    monkeypatch.setattr(tracking.time, "sleep", lambda secs: None)
    handle = SlurmHandle("local", "7", 1, 0, "/run", log_path="/run/logs/0.log")
    assert "".join(tracking.logs(handle, follow=True)) == TEXT
