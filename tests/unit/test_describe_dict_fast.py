"""The inline dict-of-tensors walk gives the same leaves and bytes as the general one.

The general path is forced by wrapping each tensor's dict in a tuple element
(a tuple is walked by `visit`, whose tensor handler is the reference).
"""

from __future__ import annotations

import torch

from flowmap.capture.describe import MAX_LEAVES, describe
from flowmap.capture.describers import torch_


def _general(payload: dict[str, torch.Tensor]) -> tuple[list[tuple[object, ...]], int]:
    """Leaves and bytes of `payload` with every tensor read by `tensor_leaf` itself."""
    from flowmap.capture.describers.walk import Walk

    w = Walk(None)
    for k, v in payload.items():
        if type(v) is torch.Tensor:
            torch_.tensor_leaf(w, v, k)
    return w.leaves, w.total()


def test_inline_walk_matches_the_tensor_leaf_path() -> None:
    base = torch.zeros(8, 16)
    payload = {
        "a": base,
        "view": base.view(-1),             # same storage: counted once
        "slice": base[:, :3],              # strided: the general path inside the loop
        "half": torch.ones(5, dtype=torch.float16),
        "empty": torch.zeros(0),           # data_ptr 0: the general path
        "long": torch.arange(7),
    }
    d = describe(payload)
    leaves, nbytes = _general(payload)
    assert d.leaves == leaves
    assert d.nbytes == nbytes
    assert d.nbytes == base.nbytes + 5 * 2 + 7 * 8


def test_shape_changed_in_place_is_seen_on_the_next_hop() -> None:
    t = torch.zeros(4, 4)
    p = {"t": t}
    first = describe(p)
    t.resize_(2, 3)
    second = describe(p)
    assert tuple(first.leaves[0][2]) == (4, 4)
    assert tuple(second.leaves[0][2]) == (2, 3)
    assert second.nbytes == 2 * 3 * 4


def test_bytes_past_the_leaf_bound_still_count() -> None:
    n = MAX_LEAVES + 10
    payload = {f"t{i}": torch.zeros(3) for i in range(n)}
    d = describe(payload)
    assert len(d.leaves) == MAX_LEAVES
    # the walk stops at the entry after the bound: MAX_LEAVES + 1 tensors counted
    assert d.nbytes == (MAX_LEAVES + 1) * 3 * 4


def test_nested_dict_paths_match_the_tensor_leaf_path() -> None:
    inner = {"a": torch.zeros(2, 3), "b": torch.ones(4, dtype=torch.int64), 7: torch.zeros(1)}
    d = describe({"batch": inner, "n": 3})
    from flowmap.capture.describers.walk import Walk

    w = Walk(None)
    for k, v in inner.items():
        torch_.tensor_leaf(w, v, f"batch.{k}")
    assert [leaf for leaf in d.leaves if leaf[1] == "tensor"] == w.leaves
    assert [leaf[0] for leaf in d.leaves] == ["batch.a", "batch.b", "batch.7", "n"]
    assert d.nbytes == w.total() + 8


def test_a_top_level_key_is_its_own_path() -> None:
    key = "".join(["log", "probs"])  # a str object of its own, not an interned constant
    d = describe({key: torch.zeros(3)})
    assert d.leaves[0][0] is key


def test_the_leaf_bound_reached_exactly() -> None:
    at_bound = describe({f"t{i}": torch.zeros(3) for i in range(MAX_LEAVES)})
    assert len(at_bound.leaves) == MAX_LEAVES and not at_bound.full
    assert at_bound.nbytes == MAX_LEAVES * 12
    # one past it: the extra tensor's bytes count, its leaf is dropped
    past = describe({f"t{i}": torch.zeros(3) for i in range(MAX_LEAVES + 1)})
    assert len(past.leaves) == MAX_LEAVES and past.full
    assert past.nbytes == (MAX_LEAVES + 1) * 12


def test_a_dtype_met_for_the_first_time_is_named_as_the_general_path_names_it() -> None:
    payload = {"a": torch.zeros(3, dtype=torch.bfloat16), "b": torch.zeros(2, dtype=torch.int16)}
    saved, facts = dict(torch_._DTYPE_NAMES), dict(torch_._DTYPES)
    torch_._DTYPE_NAMES.clear()
    torch_._DTYPES.clear()
    try:
        d = describe(payload)
    finally:
        torch_._DTYPE_NAMES.update(saved)
        torch_._DTYPES.update(facts)
    leaves, nbytes = _general(payload)
    assert d.leaves == leaves
    assert [leaf[3] for leaf in d.leaves] == ["bfloat16", "int16"]
    assert d.nbytes == nbytes == 3 * 2 + 2 * 2
