"""``xcore.runtime.collector``: the one place that tunes the garbage collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from xcore.runtime import collector


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    """Each test leaves the test process's collector as it found it."""
    enabled, threshold = gc.isenabled(), gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    (gc.enable if enabled else gc.disable)()


def test_paused_turns_it_off_and_back_on_and_resumed_lets_plugin_code_collect():
    gc.enable()
    with collector.paused() as was_on:
        assert was_on and not gc.isenabled()
        with collector.resumed(was_on):
            assert gc.isenabled() and gc.get_freeze_count() > 0  # what was made so far: out of the way
        assert not gc.isenabled()
    assert gc.isenabled()


def test_paused_leaves_a_collector_that_was_off_off():
    gc.disable()
    with collector.paused() as was_on, collector.resumed(was_on):
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_launch_imports_without_collections_then_runs_its_script_with_the_sweep_thresholds():
    gc.enable()
    assert collector.launch_imports() is True and not gc.isenabled()
    collector.script_starting()
    assert gc.isenabled() and gc.get_threshold() == collector.SWEEP_THRESHOLDS and gc.get_freeze_count() > 0


def test_freeze_survivors_moves_what_exists_out_of_collections():
    gc.unfreeze()
    collector.freeze_survivors()
    assert gc.get_freeze_count() > 0
