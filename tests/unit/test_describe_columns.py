"""Sequences of alike elements read column by column (`columns.py`, and its C twin
`ccolumns.c`) describe exactly as the element-by-element walk does: same leaves, bytes, storages,
walked nodes and bound.

Each payload is described three ways: with the C twin (where it is built), with the Python twin,
and with neither (every element and field walked one by one, the reference).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmap.capture.describe import describe
from flowmap.capture.describers import accel, columns, containers
from flowmap.capture.describers.walk import MAX_DEPTH, MAX_LEAVES, MAX_STR_SCAN, SOFT_NODES


def _fields(d: Any) -> tuple[Any, ...]:
    return d.leaves, d.nbytes, d.storages, d.nodes, d.full


@contextlib.contextmanager
def _mode(mode: str) -> Iterator[None]:
    saved = columns.FOLD[0], columns.MIN_ITEMS[0], columns.RECORDS[0], columns.columns, \
        containers.record
    try:
        if mode == "python":
            columns.FOLD[0], columns.MIN_ITEMS[0], columns.RECORDS[0] = columns.fold_columns, 1, True
        elif mode == "element":
            columns.columns = lambda *args: False  # type: ignore[assignment]
            containers.record = lambda *args: False  # type: ignore[assignment]
        yield
    finally:
        columns.FOLD[0], columns.MIN_ITEMS[0], columns.RECORDS[0], columns.columns, \
            containers.record = saved


MODES = ["python", "element"] + (["c"] if accel.fold_columns is not None else [])


def _all(payload: Any) -> dict[str, tuple[Any, ...]]:
    out = {}
    for mode in MODES:
        with _mode(mode):
            out[mode] = _fields(describe(payload))
    return out


def _both(payload: Any) -> tuple[Any, Any]:
    """(the column read, the element walk), after checking every column read gives the same."""
    got = _all(payload)
    for mode in MODES:
        assert got[mode] == got["element"], mode
    return got[MODES[-1]], got["element"]


class Leaf:
    def __init__(self, r: random.Random) -> None:
        self.expected = [str(r.randint(0, 999)) for _ in range(r.randint(1, 4))]
        self.turn_outputs = [[r.randint(0, 50)] * r.randint(1, 9) for _ in range(r.randint(1, 3))]
        self.uid = f"u{r.randint(0, 9)}"


def test_a_batch_of_trajectory_like_objects() -> None:
    r = random.Random(0)
    fast, slow = _both([Leaf(r) for _ in range(48)])
    assert fast == slow
    paths = {leaf[0]: leaf for leaf in fast[0]}
    assert paths["[*].expected[*]"][1] == "str"
    assert paths["[*].turn_outputs[*][*]"][1] == "int"


@pytest.mark.parametrize("payload", [
    ["a", "bb", "ccc"],
    ["same", "size"],
    ["é", "ascii", "日本語"],                      # UTF-8 bytes, not characters
    ["x" * 5000, "y"],                            # a long string: its head is sampled
    ["a", 1],                                     # mixed: the sample merges it
    [[1, 2], [3.0]],                              # lists of two number types
    [[1, 2], []],                                 # an empty inner list
    [[1, "a"], [2, 3]],                           # a list whose last element is no number
    [[True, False], [True]],
    tuple(f"s{i}" for i in range(40)),            # a long tuple folds like a list
])
def test_every_case_it_declines_or_takes(payload: Any) -> None:
    fast, slow = _both(payload)
    assert fast == slow


def test_a_list_met_twice_is_a_reference() -> None:
    inner = [1, 2, 3]
    fast, slow = _both([inner, inner, [4]])
    assert fast == slow
    assert {(leaf[0], leaf[1]) for leaf in fast[0]} == {("[*][*]", "int"), ("[*]", "ref")}


def test_a_list_seen_before_in_the_payload() -> None:
    inner = [1, 2, 3]
    fast, slow = _both({"a": inner, "b": [inner, [5, 6]]})
    assert fast == slow


def test_past_the_node_budget_the_sample_takes_over() -> None:
    many = [f"s{i}" for i in range(SOFT_NODES + 10)]
    fast, slow = _both({"head": [[1]] * 1, "tail": many})
    assert fast == slow
    crowded = {f"k{i}": [str(i)] * 30 for i in range(200)}  # the budget runs low part way
    fast, slow = _both(crowded)
    assert fast == slow


def test_a_string_subclass_is_walked_one_by_one() -> None:
    class Name(str):
        pass

    fast, slow = _both([Name("a"), "b"])
    assert fast == slow


_ELEMENT = st.one_of(
    st.text(max_size=6),
    st.lists(st.integers(-5, 5), max_size=4),
    st.lists(st.floats(allow_nan=False), min_size=1, max_size=3),
    st.integers(),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.lists(st.text(max_size=5), max_size=6),
                          st.lists(st.lists(st.integers(0, 9), max_size=5), max_size=6),
                          st.lists(_ELEMENT, max_size=6)),
                max_size=8))
def test_any_nesting_is_described_alike(payload: list[Any]) -> None:
    fast, slow = _both(payload)
    assert fast == slow


# -- records, dicts and tuples ---------------------------------------------------------------
@dataclasses.dataclass
class Turn:
    request_id: str
    tokens: list[int]
    logprobs: list[float]
    expected: list[str]
    reward: float | None = None
    _cache: Any = None  # private: left out while there are public fields


@dataclasses.dataclass(slots=True)
class Slotted:
    name: str
    ids: list[int]
    turns: list[list[int]]


class Private:
    def __init__(self, r: random.Random) -> None:
        self._a = r.randint(0, 9)
        self._b = "x" * r.randint(0, 3)


class Mixed:
    __slots__ = ("score",)

    def __init__(self) -> None:
        self.score = 0.5


class WithBoth(Mixed):
    def __init__(self, r: random.Random) -> None:
        super().__init__()
        self.tag = f"t{r.randint(0, 99)}"


def _turn(r: random.Random) -> Turn:
    n = r.randint(1, 6)
    return Turn(f"req-{r.randint(0, 10**6)}", [r.randint(0, 99) for _ in range(n)],
                [r.random() for _ in range(n)], [str(r.randint(0, 9))] * r.randint(1, 3),
                r.choice([None, 1.0]) if r.random() < 0.3 else 0.5)


def test_records_of_one_class_and_one_record_alone() -> None:
    r = random.Random(1)
    turns = [_turn(r) for _ in range(20)]
    for payload in (turns, turns[0], turns[:1], {"turns": turns, "first": turns[3]},
                    [Slotted("a", [1, 2], [[3], [4, 5]]), Slotted("bb", [6], [[7]])],
                    Slotted("c", [], []), [Private(r) for _ in range(5)],
                    [WithBoth(r) for _ in range(4)], WithBoth(r)):
        fast, slow = _both(payload)
        assert fast == slow
    fast, _ = _both(turns)
    paths = [leaf[0] for leaf in fast[0]]
    assert "[*]._cache" not in paths and "[*].request_id" in paths


def test_records_that_differ_are_walked_one_by_one() -> None:
    r = random.Random(2)
    a, b = _turn(r), _turn(r)
    b.extra = "one more field"  # type: ignore[attr-defined]
    c = _turn(r)
    c.tokens = []  # an empty list among full ones
    d = _turn(r)
    d.request_id = 7  # type: ignore[assignment]  # another type in one column
    unset = Slotted.__new__(Slotted)  # slots never set
    for payload in ([a, b], [a, c], [a, d], [a, _turn(r), "not a turn"], [unset], unset):
        fast, slow = _both(payload)
        assert fast == slow


def test_dicts_and_tuples_of_one_shape() -> None:
    rows = [{"prompt": f"p{i}", "completion": "é" * i, "ids": [i, i + 1]} for i in range(30)]
    pairs = [(f"k{i}", i, [1.0] * i) for i in range(1, 12)]
    for payload in (rows, pairs, [{}, {}], [(), ()], [{"a": 1}, {"b": 1}], [{"a": 1}, {"a": 1, "b": 2}],
                    [{1: "int key"}, {1: "x"}], [{"k" * 60: 1}, {"k" * 60: 2}], [(1, 2), (3,)],
                    [tuple(range(20)), tuple(range(20))], {"rows": rows, "pairs": pairs}):
        fast, slow = _both(payload)
        assert fast == slow


def test_a_key_of_another_type_is_never_compared_by_its_eq() -> None:
    class Loud(str):
        def __eq__(self, other: object) -> bool:
            raise AssertionError("user __eq__ ran")

        __hash__ = str.__hash__

    a = Turn("a", [1], [0.5], ["x"])
    b = Turn("b", [2], [0.5], ["y"])
    b.__dict__[Loud("zzz")] = 1
    a.__dict__["zzz"] = 1
    for payload in ([a, b], [{"q": 1}, {Loud("q"): 1}]):
        fast, slow = _both(payload)
        assert fast == slow


def test_shared_and_cyclic_containers_are_references() -> None:
    shared = [1, 2, 3]
    a, b = Turn("a", shared, [0.1], ["x"]), Turn("b", shared, [0.2], ["y"])
    loop: dict[str, Any] = {"name": "n"}
    loop["self"] = loop
    twice = Turn("t", [1], [0.1], ["x"])
    for payload in ([a, b], {"x": shared, "turns": [a]}, loop, [twice, twice], {"a": twice,
                                                                                  "b": [twice]}):
        fast, slow = _both(payload)
        assert fast == slow


def test_depth_and_leaf_bounds() -> None:
    deep: Any = [["leaf"]]
    for _ in range(MAX_DEPTH):
        deep = [deep]
    wide = [{f"f{i}": i for i in range(MAX_LEAVES + 5)} for _ in range(3)]
    some = {f"f{i}": [i] for i in range(MAX_LEAVES - 2)}
    some["turns"] = [_turn(random.Random(3)) for _ in range(4)]
    for payload in (deep, wide, wide[0], some, [{f"f{i}": i for i in range(MAX_LEAVES)}] * 1):
        fast, slow = _both(payload)
        assert fast == slow


def test_strings_sized_as_utf8() -> None:
    texts = ["ascii", "é", "日本語", "\ud800", "😀", "x" * (MAX_STR_SCAN + 7), "é" * (MAX_STR_SCAN * 2)]
    for payload in (texts, [Turn(t, [1], [0.0], [t]) for t in texts], [[t] for t in texts]):
        fast, slow = _both(payload)
        assert fast == slow


def test_the_node_budget_at_the_top_and_inside() -> None:
    r = random.Random(4)
    big = [_turn(r) for _ in range(SOFT_NODES // 8)]  # past the budget part way
    near = {"pad": [[1]] * (SOFT_NODES - 200), "turns": [_turn(r) for _ in range(20)]}
    for payload in (big, near, [big[0]] + [Turn("x", [1], [0.0], ["y"] * 3000)]):
        fast, slow = _both(payload)
        assert fast == slow


_SCALAR = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.floats(allow_nan=False),
                    st.booleans(), st.none())


def _records(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(Turn, st.text(max_size=3), st.lists(st.integers(0, 9), max_size=4),
                  st.lists(st.floats(allow_nan=False), min_size=1, max_size=2),
                  st.lists(st.text(max_size=2), max_size=3), st.one_of(st.none(), st.floats(0, 1))),
        st.builds(Slotted, st.text(max_size=3), st.lists(st.integers(0, 9), max_size=3),
                  st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=3)),
        st.dictionaries(st.sampled_from(["a", "b", "_c"]), leaf, max_size=3),
        st.tuples(leaf, leaf),
    )


_NESTED = st.recursive(_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4), _records(inner)),
                       max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_records(_SCALAR), _NESTED), max_size=6))
def test_any_records_are_described_alike(payload: list[Any]) -> None:
    fast, slow = _both(payload)
    assert fast == slow


@settings(max_examples=200, deadline=None)
@given(st.lists(_records(_NESTED), min_size=1, max_size=5))
def test_lists_of_alike_records_are_described_alike(payload: list[Any]) -> None:
    fast, slow = _both(payload)
    assert fast == slow


@pytest.mark.parametrize("mode", [m for m in MODES if m != "element"])
def test_alike_records_are_read_by_column(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The column read is taken, not only equal: no element is walked one by one."""
    from flowmap.capture.describers import list_sample

    def no_sample(*args: Any) -> Any:
        raise AssertionError("walked element by element")

    monkeypatch.setattr(list_sample, "sample", no_sample)
    r = random.Random(5)
    rows = [{"prompt": "p", "ids": [1, 2]} for _ in range(9)]
    with _mode(mode):
        for payload in ([_turn(r) for _ in range(12)], rows, {"batch": [[[1, 2], [3]], [[4]]] * 5}):
            d = describe(payload)
            assert d.leaves and not d.full


@pytest.mark.skipif(bool(os.environ.get("FLOWMAP_PURE_PYTHON")),
                    reason="FLOWMAP_PURE_PYTHON=1: the C twin is off")
def test_the_c_twin_is_built_here() -> None:
    # Without it the comparisons above would leave `ccolumns.c` untested.
    assert "c" in MODES


@dataclasses.dataclass
class Spec:
    key: str
    shape: tuple[int, ...]
    offset: int


@dataclasses.dataclass
class Job:
    kind: str
    specs: list[Spec]
    leaf_ids: list[list[str]]


def _job(r: random.Random) -> Job:
    specs = [Spec(f"w{i}", tuple(r.randint(1, 9) for _ in range(r.randint(1, 3))), i)
             for i in range(r.randint(1, 30))]
    return Job("train", specs, [[f"l{i}"] * r.randint(1, 4) for i in range(r.randint(1, 3))])


def test_lists_of_records_inside_records_near_the_budget() -> None:
    """An inner list is walked whole only while the budget lasts: the fold's `need` says so."""
    r = random.Random(6)
    jobs = [_job(r) for _ in range(6)]
    ragged = [Spec("a", (1,), 0), Spec("b", (2, 3, 4), 1), Spec("c", (), 2)]
    for payload in (jobs[0], jobs, ragged, Job("x", ragged, [["a"]])):
        fast, slow = _both(payload)
        assert fast == slow
    # a leaf only a later element has comes after the first element's, however deep it sits
    late = [Job("a", [], [["x"]]), Job("b", [Spec("s", (1, 2), 0)], [["y"]])]
    flat = [{"shapes": [(1,), (2,)], "tag": "x"}, {"shapes": [(1, 2, 3)], "tag": "y"}]
    for payload in (late, flat, [[(1,), (2,)], [(3, 4, 5)]]):
        fast, slow = _both(payload)
        assert fast == slow
    assert [leaf[0] for leaf in _both(flat)[0][0]] == [
        "[*].shapes[*][0]", "[*].tag", "[*].shapes[*][1]", "[*].shapes[*][2]"]
    for pad in range(SOFT_NODES - 700, SOFT_NODES + 1, 23):  # the budget runs out in between
        for payload in ({"pad": [[1]] * pad, "job": jobs[1]}, {"pad": [[1]] * pad, "jobs": jobs}):
            fast, slow = _both(payload)
            assert fast == slow
