import enum
from pathlib import Path

import pytest

from xcore.hooks.serialization import args_from_json, args_to_json
from xcore.model.args import SequentialArgs, merge_args, plain_escaper


def test_dict_args_render_like_xmanager():
    args = SequentialArgs.from_collection({"lr": 0.1, "fast": True, "slow": False, "name": "a b"})
    assert args.to_argv() == ["--lr=0.1", "--fast", "--noslow", "--name=a b"]
    # XManager's to_list() shell-quotes by default (for pasting into a command line).
    assert args.to_list() == ["--lr=0.1", "--fast", "--noslow", "--name='a b'"]


def test_merge_keeps_first_position_and_overrides_value():
    merged = merge_args(["train"], {"lr": 0.1, "seed": 1}, ["extra"], {"lr": 0.5})
    assert merged.to_argv() == ["train", "--lr=0.5", "--seed=1", "extra"]


def test_float_rendering_is_repr_exact():
    assert SequentialArgs.from_collection({"lr": 0.1 * 3}).to_argv() == ["--lr=0.30000000000000004"]


def test_string_instead_of_list_is_rejected_with_a_hint():
    with pytest.raises((TypeError, ValueError), match=r"\['--flag'\]"):
        SequentialArgs.from_collection("--flag")


def test_json_round_trip_keeps_order_and_types():
    args = merge_args(["pos", 3], {"k": [1, 2], "b": True})
    again = args_from_json(args_to_json(args))
    assert again.to_list() == args.to_list()
    assert again.keyword_args == {"k": [1, 2], "b": True}


class _Color(enum.IntEnum):
    RED = 1


class _Text(str):
    def __str__(self) -> str:
        return "subclass text"


TRICKY = [
    "a b", "it's", 'say "hi"', "$HOME and `id`", "line\nbreak", "tab\there", "", "ünïcødé ✓", "-", "--x=y",
    0, -1, 10**30, 0.1, -0.0, 1e300, float("inf"), float("nan"), 0.1 * 3, True, False, _Color.RED,
    Path("/tmp/a b"), _Text("x"), [1, "two words", 3.5], ("t", 1),
]


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_the_fast_argv_renders_every_value_exactly_like_the_general_one(value):
    """``to_argv`` renders plain str/int/float without the escaper: byte for byte what the
    general rendering (``to_list(plain_escaper)``) gives, for keywords and positionals."""
    for args in (SequentialArgs.from_collection({"v": value, "seed": 3}),
                 SequentialArgs.from_collection(["pos", value]),
                 merge_args(["train"], {"v": value}, {"lr": 0.5})):
        assert args.to_argv() == args.to_list(plain_escaper)
        args.validate()


def test_dict_args_copied_and_merged_keep_every_value_and_position():
    job_args = SequentialArgs.from_collection({"b": 1, "a": "x y"})
    merged = merge_args(job_args, {"a": "z", "c": 2.5})
    assert merged.to_argv() == ["--b=1", "--a=z", "--c=2.5"]
    assert job_args.to_argv() == ["--b=1", "--a=x y"]  # the merge copied, never changed the job's own args
    with pytest.raises(ValueError, match="NUL"):
        SequentialArgs.from_collection({"a": "x\0y"}).validate()
    with pytest.raises(TypeError, match="bytes"):
        merge_args({"ok": 1}, {"a": b"raw"}).validate()
