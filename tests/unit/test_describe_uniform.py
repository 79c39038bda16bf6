"""Sequences of strings, or of lists of numbers, read whole (`fold.uniform`) describe exactly as
the element-by-element sample does: same leaves, bytes, storages, walked nodes and bound.

Each payload is described twice, the second time with `uniform` turned off.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmap.capture.describe import describe
from flowmap.capture.describers import fold
from flowmap.capture.describers.walk import SOFT_NODES


def _fields(d: Any) -> tuple[Any, ...]:
    return d.leaves, d.nbytes, d.storages, d.nodes, d.full


def _both(payload: Any) -> tuple[Any, Any]:
    fast = _fields(describe(payload))
    saved = fold.uniform
    fold.uniform = lambda *args: False  # type: ignore[assignment]
    try:
        slow = _fields(describe(payload))
    finally:
        fold.uniform = saved
    return fast, slow


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
