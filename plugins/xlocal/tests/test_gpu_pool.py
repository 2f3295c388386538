"""The runner's device locks (``xlocal.runner.GpuPool``): two pools in one process stand for
two runners, as each opens the lock files itself (flock conflicts between open files)."""

from __future__ import annotations

from xlocal.runner import GpuPool


def test_exclusive_and_shared_holders_exclude_each_other_across_runners(tmp_path):
    one, two = GpuPool(str(tmp_path)), GpuPool(str(tmp_path))
    held = one.acquire(["0", "1"], 1, 1)
    assert held == [("0", 0)]
    assert two.acquire(["0"], 1, 1) is None and two.others_busy and two.busy == 1
    assert two.acquire(["0"], 1, 2) is None  # a sharer never joins an exclusive holder
    shared = two.acquire(["0", "1"], 1, 2)
    assert shared == [("1", 0)]
    assert one.acquire(["1"], 1, 1) is None and one.others_busy  # nor an exclusive one sharers
    assert one.acquire(["1"], 1, 2) == [("1", 1)]  # a second sharer, in the second share slot
    assert GpuPool(str(tmp_path)).acquire(["1"], 1, 2) is None  # a third: gpu_share=2 is full
    one.release(held)
    assert two.acquire(["0"], 1, 1) == [("0", 0)]


def test_own_holders_are_counted_and_a_failed_acquire_holds_nothing(tmp_path):
    pool = GpuPool(str(tmp_path))
    first, second = pool.acquire(["0", "1"], 1, 2), pool.acquire(["0", "1"], 1, 2)
    assert sorted([*first, *second]) == [("0", 0), ("1", 0)]  # sharers spread over the devices first
    third = pool.acquire(["0", "1"], 1, 2)
    assert third is not None and third[0][1] == 1
    assert pool.acquire(["0", "1"], 2, 1) is None and not pool.others_busy and pool.busy == 2
    other = GpuPool(str(tmp_path))
    pool.release(first)
    pool.release(third)
    # The device of ``second`` is still shared by this runner: another cannot take it whole.
    device = second[0][0]
    assert other.acquire([device], 1, 1) is None
    pool.release(second)
    assert other.acquire(["0", "1"], 2, 1) == [("0", 0), ("1", 0)]
    assert pool.acquire(["0", "1", "2"], 2, 1) is None and pool.busy == 2
    assert other.acquire(["2"], 1, 1) == [("2", 0)]  # the failed acquire left device 2 free
