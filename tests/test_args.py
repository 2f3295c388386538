import pytest

from xcore.hooks.serialization import args_from_json, args_to_json
from xcore.launch.args import SequentialArgs, merge_args


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
