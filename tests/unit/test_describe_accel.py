"""The C loops (`cwalk.c`) describe every payload exactly as the Python loops they stand in for.

Each payload is described twice, once with the C loops and once with them turned
off (the Python loops, the reference), and every field of the two descriptions
must be equal: leaves, bytes, storages, walked nodes, and whether the walk hit
its bound.
"""

from __future__ import annotations

import os
import random
import warnings
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmap.capture.describe import MAX_LEAVES, describe
from flowmap.capture.describers import accel, torch_, walk

pytestmark = pytest.mark.skipif(bool(os.environ.get("FLOWMAP_PURE_PYTHON")),
                                reason="FLOWMAP_PURE_PYTHON=1: the C loops are off")


def _fields(d: Any) -> tuple[Any, ...]:
    return d.leaves, d.nbytes, d.storages, d.nodes, d.full


def _both(payload: Any, dims: dict[str, tuple[str, ...]] | None = None) -> tuple[Any, Any]:
    """(with the C loops, with the Python loops) descriptions of `payload`."""
    fast = _fields(describe(payload, dims))
    saved = torch_.tensor_entries, walk.disjoint_total, accel.array_data
    torch_.tensor_entries = walk.disjoint_total = accel.array_data = None
    try:
        pure = _fields(describe(payload, dims))
    finally:
        torch_.tensor_entries, walk.disjoint_total, accel.array_data = saved
    return fast, pure


def test_the_c_loops_are_built_here() -> None:
    # Without them every comparison below would hold trivially.
    assert accel.tensor_entries is not None and accel.disjoint_total is not None
    assert accel.array_data is not None


def test_numpy_arrays_start_where_their_interface_says() -> None:
    import numpy as np

    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    arrays = [base, base[2:], base[:, 3], base[::-2, 1:], base.T, np.ones(()),
              np.zeros(0), np.broadcast_to(np.ones(3), (4, 3)), np.array(["a", None], dtype=object)]
    for a in arrays:
        assert accel.array_data(a, np.ndarray) == a.__array_interface__["data"][0]  # type: ignore[misc]
    # a subclass, or anything not an array, is left to the interface numpy builds
    assert accel.array_data(base.view(np.recarray), np.ndarray) is None  # type: ignore[misc]
    assert accel.array_data([1.0], np.ndarray) is None  # type: ignore[misc]
    payload = {"a": base[1:], "b": (base[:, 2], base.view(np.recarray)), "c": arrays[-1]}
    fast, pure = _both(payload)
    assert fast == pure and fast[2]  # the same leaves, bytes and storage addresses


def test_one_dimensional_arrays_in_a_step_result_every_stride() -> None:
    """An exact 1-D array takes the inlined path (`numpy_._plain_vector`): an environment's
    observation, beside the reward and flags in its step's tuple."""
    import numpy as np

    r = np.arange(20, dtype=np.int16)
    vectors = [np.zeros(4, np.float32), r[::3], r[::-2], r[5:5], np.broadcast_to(np.ones(1), (6,)),
               r[3:].view(np.uint8), np.array([1.5, None], dtype=object)]
    for v in vectors:
        fast, pure = _both({"result": (v, 1.0, False, True, 7, {}), "row": v})
        assert fast == pure, v.strides


def test_a_dict_of_cpu_tensors() -> None:
    payload = {f"t{i}": torch.zeros(4, i + 1) for i in range(10)}
    fast, pure = _both(payload)
    assert fast == pure
    assert fast[1] == sum(4 * (i + 1) * 4 for i in range(10))


def test_every_way_the_c_loop_hands_back_to_python() -> None:
    base = torch.zeros(8, 16)
    payload: dict[Any, Any] = {
        "a": base,
        "view": base.view(-1),              # same storage: counted once
        "slice": base[:, :3],               # strided
        "x" * 60: torch.ones(2),            # a key past MAX_KEY_CHARS
        7: torch.ones(3),                   # a key that is not a str
        "half": torch.ones(5, dtype=torch.float16),
        "empty": torch.zeros(0),            # no data pointer
        "param": torch.nn.Parameter(torch.ones(2)),  # a subclass
        "n": 3,
        "inner": {"b": torch.arange(4), "c": "text"},
        "last": torch.ones(6, dtype=torch.int64),
    }
    fast, pure = _both(payload)
    assert fast == pure
    assert fast[1] == base.nbytes + 2 * 4 + 3 * 4 + 5 * 2 + 2 * 4 + 8 + 4 * 8 + 4 + 6 * 8


def test_dims_name_the_leaves_alike() -> None:
    payload = {"ids": torch.zeros(2, 5, dtype=torch.int64), "mask": torch.ones(2, 5)}
    dims = {"ids": ("batch", "tokens")}
    fast, pure = _both(payload, dims)
    assert fast == pure
    assert fast[0][0][7] == ("batch", "tokens") and fast[0][1][7] is None


@pytest.mark.parametrize("extra", [0, 1, 10])
def test_the_leaf_bound(extra: int) -> None:
    payload = {f"t{i}": torch.zeros(3) for i in range(MAX_LEAVES + extra)}
    fast, pure = _both(payload)
    assert fast == pure
    assert len(fast[0]) == MAX_LEAVES and fast[4] == (extra > 0)


def test_a_dtype_not_named_yet() -> None:
    saved, facts = dict(torch_._DTYPE_NAMES), dict(torch_._DTYPES)
    torch_._DTYPE_NAMES.clear()
    torch_._DTYPES.clear()
    try:
        d = describe({"a": torch.zeros(3, dtype=torch.bfloat16), "b": torch.zeros(2)})
    finally:
        torch_._DTYPE_NAMES.update(saved)
        torch_._DTYPES.update(facts)
    assert [leaf[3] for leaf in d.leaves] == ["bfloat16", "float32"]
    assert d.nbytes == 3 * 2 + 2 * 4


def test_a_shape_changed_in_place_is_read_again() -> None:
    t = torch.zeros(4, 4)
    payload = {"t": t}
    assert describe(payload).leaves[0][2] == (4, 4)
    t.resize_(2, 3)
    assert describe(payload).leaves[0][2] == (2, 3)


# -- any dict: tensors of every kind, views that overlap, other values, odd keys --
_BASE = torch.arange(64, dtype=torch.float32)
_VALUES = [
    lambda r: torch.zeros(r.randint(0, 4), r.randint(1, 5)),
    lambda r: torch.ones(r.randint(1, 6), dtype=r.choice([torch.float16, torch.int64, torch.uint8])),
    lambda r: _BASE[r.randint(0, 32):r.randint(32, 64)],           # overlapping views
    lambda r: _BASE.view(8, 8)[:, : r.randint(1, 8)],              # strided views
    lambda r: torch.zeros(r.randint(1, 4)).expand(3, -1),          # stride 0
    lambda r: r.randint(0, 10),
    lambda r: {"inner": torch.zeros(r.randint(1, 3))},
    lambda r: None,
]
_KEYS = [lambda r, i: f"k{i}", lambda r, i: "long" * 20 + str(i), lambda r, i: i]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_KEYS) - 1), st.integers(0, len(_VALUES) - 1)),
                max_size=24),
       st.integers(0, 2**16))
def test_any_dict_is_described_alike(entries: list[tuple[int, int]], seed: int) -> None:
    r = random.Random(seed)
    payload = {_KEYS[k](r, i): _VALUES[v](r) for i, (k, v) in enumerate(entries)}
    fast, pure = _both(payload)
    assert fast == pure


# -- disjoint_total against the Python count ------------------------------------------
def _python_total(pieces: list[tuple[int, int, int]]) -> int:
    saved = walk.disjoint_total
    walk.disjoint_total = None
    try:
        return walk.space_total(list(pieces))
    finally:
        walk.disjoint_total = saved


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**48), st.integers(0, 4096), st.integers(0, 4096)),
                min_size=2, max_size=80))
def test_disjoint_total_counts_as_python_does(raw: list[tuple[int, int, int]]) -> None:
    pieces = [(start, start + span, min(weight, span)) for start, span, weight in raw]
    got = accel.disjoint_total(pieces)  # type: ignore[misc]
    ordered = sorted(pieces)
    overlap = any(b[0] < a[1] for a, b in zip(ordered, ordered[1:]))
    if overlap:
        assert got is None
    else:
        assert got == _python_total(pieces)


def test_disjoint_total_leaves_what_it_cannot_hold_to_python() -> None:
    assert accel.disjoint_total is not None
    far = 1 << 64  # storage-less tensors stand in at id(t) << 64
    assert accel.disjoint_total([(far, far + 4, 4), (0, 4, 4)]) is None
    assert accel.disjoint_total([(0, 4, -1), (8, 9, 1)]) is None
    assert accel.disjoint_total([(0, 4, 4), [8, 9, 1]]) is None  # type: ignore[list-item]
    assert accel.disjoint_total([(0, 4, 4), (2, 9, 7)]) is None  # overlapping
    assert accel.disjoint_total([(8, 9, 1), (0, 4, 4)]) == 5


def test_tensor_entries_checks_its_arguments() -> None:
    # It reads its arguments by hand (METH_FASTCALL): a wrong one is a TypeError, never a crash.
    assert accel.tensor_entries is not None
    describe({"a": torch.zeros(1)})  # binds torch's readers
    t = torch_._T
    good: list[Any] = [{"a": torch.zeros(2)}, t["Tensor"], t["readers"], torch_._DTYPES, "",
                       48, None, [], [], [], 4, {}, []]
    assert accel.tensor_entries(*good) == (1, 0)
    assert good[12] == [good[0]["a"]]  # the tensor behind the storage key, for the writer
    with pytest.raises(TypeError):
        accel.tensor_entries(*good[:12])
    for i, bad in ((0, []), (2, []), (3, []), (4, b""), (5, "48"), (7, ()), (8, ()), (9, ()),
                   (10, 1.5), (11, []), (12, ())):
        with pytest.raises(TypeError):
            accel.tensor_entries(*good[:i], bad, *good[i + 1:])


# -- what the C loop keeps between hops: the last leaf per path, a candidate only --------
def _every_dtype() -> list[torch.dtype]:
    found = {getattr(torch, n) for n in dir(torch) if isinstance(getattr(torch, n), torch.dtype)}
    out = []
    for dt in sorted(found, key=str):
        try:
            with warnings.catch_warnings():  # quantized and complex32 tensors warn
                warnings.simplefilter("ignore")
                torch.empty(2, dtype=dt)
        except Exception:  # a dtype with no CPU tensor
            continue
        out.append(dt)
    return out


@pytest.mark.filterwarnings("ignore::UserWarning")  # quantized and complex32 tensors warn
@pytest.mark.parametrize("dtype", _every_dtype(), ids=str)
def test_bytes_from_the_shape_are_torchs_for_every_dtype(dtype: torch.dtype) -> None:
    # The C loop counts shape x item size instead of reading `nbytes`.
    payload = {"a": torch.empty(3, 5, dtype=dtype), "b": torch.empty(7, dtype=dtype)}
    for _ in range(2):  # the second hop hands out the leaves of the first
        fast, pure = _both(payload)
        assert fast == pure
        assert fast[1] == payload["a"].nbytes + payload["b"].nbytes


def test_a_tensor_changed_in_place_is_read_again_every_way() -> None:
    t = torch.zeros(4, 4)
    payload = {"t": t, "u": torch.zeros(3)}
    shapes = []
    for change in (lambda: None, lambda: t.resize_(2, 3), lambda: t.as_strided_((3, 2), (2, 1)),
                   lambda: t.set_(torch.zeros(5, dtype=torch.float32)),
                   lambda: t.set_(torch.zeros(2, 2, dtype=torch.float32).untyped_storage()),
                   lambda: t.as_strided_((2, 2), (1, 2))):  # strided: Python's way
        change()
        fast, pure = _both(payload)
        assert fast == pure
        shapes.append(fast[0][0][2])
        assert fast[0][0][5] == t.nbytes
    assert shapes == [(4, 4), (2, 3), (3, 2), (5,), (4,), (2, 2)]


def test_an_unchanged_tensor_keeps_its_leaf() -> None:
    payload = {"a": torch.zeros(2, 3), "b": torch.zeros(4, dtype=torch.int64)}
    first = describe(payload).leaves
    again = describe(payload).leaves
    assert all(x is y for x, y in zip(first, again))  # the schema compares by identity
    payload["b"] = torch.zeros(4, dtype=torch.float64)  # same path, shape and bytes; another dtype
    third = describe(payload).leaves
    assert third[0] is first[0] and third[1] != first[1]
    assert third[1][3] == "float64" and third[1][5] == 32
    payload["a"] = torch.zeros(3, 2)  # the same bytes in another shape
    assert describe(payload).leaves[0][2] == (3, 2)


_SHAPES = st.lists(st.integers(0, 5), min_size=0, max_size=3)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), _SHAPES,
                          st.sampled_from([torch.float32, torch.float16, torch.int64]),
                          st.sampled_from([None, ("x",), ("y", "z")]), st.booleans()),
                min_size=1, max_size=12))
def test_hops_of_changing_payloads_are_described_alike(
        hops: list[tuple[str, list[int], torch.dtype, tuple[str, ...] | None, bool]]) -> None:
    # One path, hop after hop, with its shape, dtype and dims changing or not; the leaves
    # the C loop hands out again must always equal what the Python loop reads now.
    for key, shape, dtype, named, nested in hops:
        t = torch.zeros(tuple(shape), dtype=dtype)
        payload: dict[str, Any] = {key: t, "k": torch.ones(2)}
        if nested:
            payload = {"inner": payload}
        path = f"inner.{key}" if nested else key
        fast, pure = _both(payload, {path: named} if named else None)
        assert fast == pure


def test_dims_of_other_objects_are_never_compared_by_their_eq() -> None:
    # The C loop compares a kept leaf's dims with the new ones only where they are strings:
    # an object's own __eq__ is user code, which capture never calls.
    calls = []

    class Loud:
        def __eq__(self, other: object) -> bool:
            calls.append(other)
            return True

        __hash__ = object.__hash__

    payload = {"a": torch.zeros(2)}
    for _ in range(3):
        fast, pure = _both(payload, {"a": (Loud(),)})
        assert fast[0][0][2] == pure[0][0][2] == (2,)
    assert calls == []
