"""The shared backend plumbing in xcore.plumbing (through its public names in xcore.plugin)."""

from __future__ import annotations

import os
import signal
import stat
import threading
import time

import pytest

from xcore.plugin import (
    DEFAULT_IGNORE_PATTERNS,
    DigestCache,
    Status,
    TextDecoder,
    atomic_write,
    cancel_requested,
    describe_exit,
    exit_state,
    follow_bytes,
    follow_file,
    is_ignored,
    iter_project_files,
    lost_state,
    mark_cancelled,
    normalize_exit_code,
    private_dir,
)

TEXT = "héllo ✓ 日本 🎉 done\n"


def test_a_character_split_across_reads_is_never_garbled():
    data = TEXT.encode()
    # every split point, including inside the 2-, 3- and 4-byte characters
    for cut in range(1, len(data)):
        def read_from(offset: int, cut: int = cut) -> bytes:  # two reads, split at byte `cut`
            return data[offset:cut] if offset < cut else data[offset:]

        chunks = list(follow_bytes(read_from, follow=False))
        assert len(chunks) >= 1
        assert "".join(chunks) == TEXT, cut
        assert "\ufffd" not in "".join(chunks)


def test_one_byte_at_a_time_decodes_exactly():
    data = TEXT.encode()
    chunks = list(follow_bytes(lambda offset: data[offset:offset + 1], follow=False))
    assert "".join(chunks) == TEXT
    assert all(chunk for chunk in chunks)  # never an empty chunk


def test_decoder_holds_back_an_incomplete_character_and_replaces_it_at_the_end():
    decoder = TextDecoder()
    assert decoder.feed("é".encode()[:1]) == ""
    assert decoder.feed("é".encode()[1:]) == "é"
    assert decoder.feed(b"\xe6\x97") == ""
    assert decoder.finish() == "\ufffd"
    assert TextDecoder().feed(b"ok\xff!") == "ok\ufffd!"


def test_follow_file_waits_for_the_end_and_reads_what_was_written_just_before_it(tmp_path):
    log = tmp_path / "job.log"
    done = threading.Event()
    payload = TEXT.encode()

    def writer():
        time.sleep(0.1)  # the log does not exist yet when following starts
        with open(log, "wb") as out:
            for i in range(len(payload)):
                out.write(payload[i:i + 1])
                out.flush()
                time.sleep(0.005)
            out.write("last words ✓\n".encode())
        done.set()  # finished: the final bytes were written before the job ended

    thread = threading.Thread(target=writer)
    thread.start()
    text = "".join(follow_file(log, follow=True, finished=done.is_set, poll_secs=0.01))
    thread.join()
    assert text == TEXT + "last words ✓\n"


def test_follow_false_on_a_missing_log_yields_nothing(tmp_path):
    assert list(follow_file(tmp_path / "nope.log", follow=False)) == []


def test_atomic_write_is_private_and_replaces_whole(tmp_path):
    target = tmp_path / "sub" / "state.json"
    atomic_write(target, "one")
    atomic_write(target, b"two")
    assert target.read_text() == "two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]  # no temporary left behind


def test_atomic_write_failure_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "state.json"
    atomic_write(target, "old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_private_dir_mode(tmp_path):
    assert stat.S_IMODE(private_dir(tmp_path / "a" / "b").stat().st_mode) == 0o700


def test_private_dir_makes_missing_parents_private_under_a_loose_umask(tmp_path):
    old = os.umask(0o022)
    try:
        private_dir(tmp_path / "a" / "b" / "c")
    finally:
        os.umask(old)
    assert [stat.S_IMODE((tmp_path / p).stat().st_mode) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3


def test_cancel_markers(tmp_path):
    marker = tmp_path / "jobs" / "3.cancel"
    assert not cancel_requested(marker)
    mark_cancelled(marker)
    first = marker.read_text()
    mark_cancelled(marker)  # idempotent: the first request's time stays
    assert cancel_requested(marker) and marker.read_text() == first
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600


def test_exit_wording_and_the_one_code_convention():
    assert describe_exit(0) == "exit code 0"
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-9) == "killed by signal 9 (SIGKILL)"
    assert describe_exit(137) == "killed by signal 9 (SIGKILL)"
    assert describe_exit(137, signalled=False) == "exit code 137"
    assert normalize_exit_code(-signal.SIGTERM) == 128 + signal.SIGTERM
    state = exit_state(-9)
    assert (state.status, state.exit_code, state.message) == (Status.FAILED, 137, "killed by signal 9 (SIGKILL)")
    assert exit_state(-15, cancelled=True).status is Status.CANCELLED
    assert exit_state(-15, cancelled=True).exit_code == 143
    assert exit_state(0, cancelled=True).status is Status.COMPLETED  # it finished before the cancel
    assert exit_state(2).status is Status.FAILED and exit_state(2).message == "exit code 2"
    assert lost_state().status is Status.FAILED and lost_state("purged").message == "lost: purged"


def test_the_ignore_list_is_the_union_of_both_plugins_lists():
    for path in (".git/config", "pkg/__pycache__/m.cpython-311.pyc", "pkg/m.pyc", ".venv/bin/python",
                 "sub/venv/x", "x.egg-info/PKG-INFO", "src/x.egg-info/PKG-INFO", "node_modules/a.js",
                 ".mypy_cache/x", "a/.pytest_cache/b", ".ruff_cache/x", ".tox/x", ".nox/x", ".DS_Store",
                 ".eggs/x", "build/lib/x.py", "dist/x.whl", "deep/.hg/x", ".svn/x"):
        assert is_ignored(path), path
    for path in ("train.py", "pkg/build/model.py", "pkg/dist/x.py", "data/venv.txt", "README.md", "gitignore"):
        assert not is_ignored(path), path


def test_the_docker_patterns_mean_the_same_as_is_ignored():
    from xcore.images.ignore import IgnoreRules  # the dockerignore engine the image builder uses

    rules = IgnoreRules(DEFAULT_IGNORE_PATTERNS)
    for path in (".git/config", "a/b/__pycache__/c.pyc", "m.pyc", "build/x", "pkg/build/x", "src/a.egg-info/x",
                 "train.py", "venv/x", "a/node_modules/b", "dist/a", "a/dist/b", ".DS_Store", "sub/.DS_Store"):
        assert rules.excluded(path) == is_ignored(path), path


def test_iter_project_files_skips_ignored_directories(tmp_path):
    for rel in ("train.py", "pkg/__init__.py", "pkg/build/m.py", "pkg/__pycache__/x.pyc", ".git/HEAD",
                "build/out.txt", "a.pyc"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    assert [rel for rel, _ in iter_project_files(tmp_path)] == ["pkg/__init__.py", "pkg/build/m.py", "train.py"]


def test_digest_cache_rehashes_only_changed_files_and_persists(tmp_path):
    data = tmp_path / "big.bin"
    data.write_bytes(b"x" * 100_000)
    cache_file = tmp_path / "cache" / "digests.json"
    with DigestCache(cache_file) as cache:
        first = cache.digest(data)
        assert cache.digest(data) == first and (cache.hits, cache.misses) == (1, 1)
    assert stat.S_IMODE(cache_file.stat().st_mode) == 0o600
    again = DigestCache(cache_file)
    assert again.digest(data) == first and again.hits == 1  # remembered across processes
    data.write_bytes(b"y" * 100_000)  # same size, new content
    assert again.digest(data) != first and again.misses == 1
    cache_file.write_text("{corrupt")
    assert DigestCache(cache_file).digest(data) == again.digest(data)
