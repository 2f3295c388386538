"""A launch builds each task's variables when it writes that task, not all of them first
(issue 31: 100,000 tasks' attempt and checkpoint variables were ~40 MiB of the launcher's peak).
Counted, not measured: how many tasks are alive at once while ``tasks.bin`` is written."""

from __future__ import annotations

import weakref

from xcore.model.execution import LaunchRequest
from xcore.plugin import checkpoint_dir
from xhpc import launch, scripts

N = 1000


def _requests() -> list[LaunchRequest]:
    return [LaunchRequest(i + 1, 3, i + 1, "job", None, None, [f"--seed={i}"], {"A": "1", "B": str(i % 2)},  # type: ignore[arg-type]
                          attempt=1 + (i == 7)) for i in range(N)]


def test_tasks_are_built_one_at_a_time_while_tasks_bin_is_written(monkeypatch) -> None:
    alive, most = [0], [0]
    real_init = scripts.Task.__init__

    def freed() -> None:
        alive[0] -= 1

    def counted_init(self, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        real_init(self, *args, **kwargs)
        weakref.finalize(self, freed)
        alive[0] += 1
        most[0] = max(most[0], alive[0])

    monkeypatch.setattr(scripts.Task, "__init__", counted_init)
    tasks = launch._Tasks(_requests(), "/stage")
    common = scripts.common_env(tasks)
    data, offsets = scripts.encode_tasks("/w", ["prog"], common, tasks)
    assert most[0] <= 3, f"{most[0]} of {N} tasks held at once"  # the first (common_env), the last, the next
    assert len(offsets) == N + 2 and offsets[-1] == len(data)


def test_the_tasks_read_as_the_list_they_replace() -> None:
    requests = _requests()
    tasks = launch._Tasks(requests, "/stage/")
    expected = [scripts.Task(r.args, {**r.env, "XCORE_ATTEMPT": str(r.attempt),
                                      "XCORE_CHECKPOINT_DIR": checkpoint_dir("/stage/", 3, r.work_unit_id)})
                for r in requests]
    assert list(tasks) == expected and tasks[5] == expected[5] and tasks[10:12] == expected[10:12]
    assert len(tasks) == N
    assert scripts.common_env(tasks) == scripts.common_env(expected) == {"A": "1"}
    assert scripts.encode_tasks("/w", ["p"], {"A": "1"}, tasks) == scripts.encode_tasks("/w", ["p"], {"A": "1"},
                                                                                         expected)
