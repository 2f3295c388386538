"""xcore.model.datamodel's classes print, compare and hash as the same classes made by attrs do."""

from __future__ import annotations

import pickle
from typing import Any

import attrs
import pytest
from class_checks import assert_made_as_attrs_makes_it, datamodel_classes

from xcore.model import datamodel


def _pair(decorator: str, body: dict[str, Any], **options: Any) -> tuple[type, type]:
    """The same class twice: from attrs' decorator and from datamodel's."""
    made = []
    for module in (attrs, datamodel):
        namespace = {"__annotations__": {name: "Any" for name in body if not name.startswith("__")}, **body}
        cls = type("Point", (), namespace)
        made.append(getattr(module, decorator)(cls, **options))
    return made[0], made[1]


def _hashes(item: object) -> int | None:
    try:
        return hash(item)
    except TypeError:
        return None


def _fields() -> dict[str, Any]:
    return {
        "x": attrs.field(),
        "y": attrs.field(default=0),
        "hidden": attrs.field(default="secret", repr=False),
        "shown": attrs.field(default=(1, 2), repr=lambda v: f"<{len(v)}>"),
        "loose": attrs.field(default=1.0, eq=False),
        "folded": attrs.field(default="A", eq=attrs.cmp_using(eq=lambda a, b: a.lower() == b.lower())),
        "plain": attrs.field(default="C", hash=False),
        "keyed": attrs.field(default="B", eq=str.lower),
        "later": attrs.field(init=False),
    }


@pytest.mark.parametrize("decorator", ["define", "frozen"])
def test_repr_eq_hash_match_attrs(decorator):
    theirs, ours = _pair(decorator, _fields())
    for cls in (theirs, ours):
        cls.__qualname__ = "Point"
    samples = [((1,), {}), ((1,), {"y": 2}), ((1,), {"loose": 9.0}), ((1,), {"keyed": "b"}), ((2,), {"hidden": "x"}),
               (([1],), {}), ((float("nan"),), {})]
    built = [(theirs(*a, **k), ours(*a, **k)) for a, k in samples]
    for t, o in built:
        assert repr(o) == repr(t)  # `later` never set: NOTHING
        for item in (t, o):
            object.__setattr__(item, "later", [3])  # (a frozen class's __init__ would set it)
        assert repr(o) == repr(t)
    for t1, o1 in built:
        for t2, o2 in built:
            assert (o1 == o2) == (t1 == t2) and (o1 != o2) == (t1 != t2)
            if decorator == "frozen" and t1 == t2 and _hashes(t1) is not None:
                assert _hashes(o1) == _hashes(o2) is not None
    assert (ours(1) == theirs(1)) is False  # another class: never equal
    for t, o in built:
        assert (_hashes(o) is None) == (_hashes(t) is None)  # a list, or cmp_using's key: unhashable in both
    if decorator == "frozen":
        hashable = {name: field for name, field in _fields().items() if name not in ("folded", "later")}
        theirs, ours = _pair(decorator, hashable)
        key = ours(1, keyed="Q")
        assert {key: 1}[ours(1, keyed="q", loose=5.0)] == 1  # a dict key, by its eq fields (through eq_key)
        assert hash(ours(1, plain="D")) == hash(ours(1)) and hash(ours(1)) != hash(ours(2))
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            key.x = 2
    else:
        with pytest.raises(TypeError, match="unhashable"):
            hash(ours(1))
        assert ours.__hash__ is None and theirs.__hash__ is None


def test_recursive_repr_and_subclasses():
    theirs, ours = _pair("define", {"child": attrs.field(default=None)})
    t, o = theirs(), ours()
    t.child, o.child = t, o
    assert repr(o) == repr(t) == "Point(child=...)"

    @datamodel.define
    class Sub(ours):  # type: ignore[valid-type, misc]
        extra: int = 5

    assert repr(Sub()) == "Sub(child=None, extra=5)" and Sub() == Sub() and Sub() != ours() and Sub(extra=1) != Sub()


def test_methods_the_class_defines_are_kept():
    @datamodel.frozen
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    assert repr(Own(1)) == "own" and Own(1) == Own(2) and hash(Own(3)) == 7


@datamodel.frozen
class Module:
    a: int
    b: tuple[int, ...] = ()


def test_pickles_and_evolves():
    item = Module(1, (2,))
    assert attrs.evolve(item, a=2) == Module(2, (2,)) and attrs.asdict(item) == {"a": 1, "b": (2,)}
    assert pickle.loads(pickle.dumps(item)) == item and hash(pickle.loads(pickle.dumps(item))) == hash(item)


def test_other_comparison_options_are_refused():
    with pytest.raises(TypeError, match="use attrs itself"):
        datamodel.define(order=True)
    with pytest.raises(TypeError, match="use attrs itself"):
        datamodel.frozen(str=True)


def test_the_core_classes_print_compare_and_hash_as_attrs_made_them():
    """Each class of the core made by datamodel, against an attrs class with the same fields and
    options, on instances whose fields hold the same values (and ones that differ in one field).
    xlocal's classes: plugins/xlocal/tests/test_local_classes.py."""
    import xcore

    classes = datamodel_classes(xcore, skip=("xcore.testing", "xcore.ui", "xcore.cli.templates"))
    names = {c.__name__ for c in classes}
    assert len(classes) >= 40 and names >= {"JobState", "Job", "JobRecord", "LaunchRequest"}
    for cls in classes:
        assert_made_as_attrs_makes_it(cls)
