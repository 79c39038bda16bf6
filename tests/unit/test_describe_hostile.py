"""describe never runs the user's code, and costs a bounded amount whatever the payload.

Every hook a user could define counts its calls in CALLS; the tests assert none
ran. Cost is checked by counting walked nodes (Description.nodes), never by timing.
"""

from __future__ import annotations

import collections.abc
import json

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode

from flowmap.capture.describe import MAX_SCHEMA_CHARS, describe
from flowmap.capture.describers.walk import HARD_NODES, MAX_DEPTH

CALLS: list[str] = []


def hook(name):
    def f(self, *a, **k):
        CALLS.append(name)
        raise AssertionError(f"user hook {name} ran")
    return f


HOOKS = ["__getattr__", "__format__", "__repr__", "__str__", "__len__", "__iter__", "__bool__",
         "__getitem__", "__contains__", "__reduce_ex__", "__sizeof__", "__eq__", "__hash__",
         "keys", "items", "values"]


class Meta(type):
    """A metaclass whose hooks count: hashing, comparing or isinstance on the class itself."""

    __hash__ = hook("Meta.__hash__")  # type: ignore[assignment]
    __eq__ = hook("Meta.__eq__")  # type: ignore[assignment]
    __instancecheck__ = hook("Meta.__instancecheck__")
    __subclasscheck__ = hook("Meta.__subclasscheck__")

    @property
    def __mro__(cls):  # type: ignore[override]
        CALLS.append("Meta.__mro__")
        return (object,)

    @property
    def __name__(cls):  # type: ignore[override]
        CALLS.append("Meta.__name__")
        return "x"


def hostile_namespace(prefix: str) -> dict:
    ns = {name: hook(f"{prefix}.{name}") for name in HOOKS}

    def getattribute(self, name):
        CALLS.append(f"{prefix}.__getattribute__")
        return object.__getattribute__(self, name)

    ns["__getattribute__"] = getattribute
    ns["__class__"] = property(hook(f"{prefix}.__class__"))
    return ns


Plain = Meta("Plain", (), hostile_namespace("Plain"))
HostileList = type("HostileList", (list,), hostile_namespace("HostileList"))
HostileDict = type("HostileDict", (dict,), hostile_namespace("HostileDict"))
HostileTuple = type("HostileTuple", (tuple,), hostile_namespace("HostileTuple"))
HostileStr = type("HostileStr", (str,), {**hostile_namespace("HostileStr"), "encode": hook("encode"),
                                         "isascii": hook("isascii")})
DictProperty = type("DictProperty", (), {"__dict__": property(hook("DictProperty.__dict__"))})
HostileKey = type("HostileKey", (), {**hostile_namespace("HostileKey"),
                                     "__hash__": object.__hash__})  # a dict key must hash


class LazyMapping(collections.abc.Mapping):
    def __getitem__(self, k):
        CALLS.append("LazyMapping.__getitem__")
        raise KeyError(k)

    def __iter__(self):
        CALLS.append("LazyMapping.__iter__")
        return iter(["a"])

    def __len__(self):
        CALLS.append("LazyMapping.__len__")
        return 1


class Slotted:
    __slots__ = ("x", "y")

    def __init__(self):
        self.x = torch.zeros(3)


Slotted.y = property(hook("Slotted.y"))  # type: ignore[attr-defined]  # shadows the slot name


class HookedTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        CALLS.append(f"__torch_function__ {getattr(func, '__name__', func)}")
        return super().__torch_function__(func, types, args, kwargs or {})

    @property
    def shape(self):  # type: ignore[override]
        CALLS.append("HookedTensor.shape")
        return torch.Size([1])


class HookedArray(np.ndarray):
    def __array_finalize__(self, obj):
        if obj is not None and getattr(self, "_ready", False):
            CALLS.append("__array_finalize__")

    @property
    def nbytes(self):  # type: ignore[override]
        CALLS.append("HookedArray.nbytes")
        return 1


class CountingMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        CALLS.append(f"mode {getattr(func, '__name__', func)}")
        return func(*args, **(kwargs or {}))


def hostile_objects():
    obj = Plain()
    object.__setattr__(obj, "payload", torch.zeros(2))
    return [
        obj,
        HostileList([1, 2, torch.zeros(3)]),
        HostileDict(a=torch.zeros(2), b="x"),
        HostileTuple((1, "a", torch.zeros(1))),
        HostileStr("héllo"),
        DictProperty(),
        LazyMapping(),
        Slotted(),
        {HostileKey(): torch.zeros(2)},
        torch.zeros(4, 2).as_subclass(HookedTensor),
        np.zeros(8).view(HookedArray),
        Meta("Dyn", (), {}),  # a class as payload
        iter([1, 2, 3]),
        (x for x in [1]),
    ]


@pytest.fixture(autouse=True)
def clear_calls():
    CALLS.clear()
    yield
    CALLS.clear()


def check(desc) -> None:
    assert CALLS == []
    assert desc.nodes <= HARD_NODES + MAX_DEPTH
    schema = json.dumps([[leaf[0], leaf[1], leaf[3], leaf[4]] for leaf in desc.leaves])
    assert len(schema) <= MAX_SCHEMA_CHARS + 64 * len(desc.leaves)


@pytest.mark.parametrize("index", range(len(hostile_objects())))
def test_no_user_hook_runs(index):
    obj = hostile_objects()[index]
    CALLS.clear()
    check(describe({"h": obj, "t": torch.zeros(2)}))


def test_hooked_tensor_and_array_are_still_sized_from_their_real_metadata():
    t = torch.zeros(4, 2).as_subclass(HookedTensor)
    a = np.zeros(8).view(HookedArray)
    CALLS.clear()
    d = describe({"t": t, "a": a})
    check(d)
    leaves = {leaf[0]: leaf for leaf in d.leaves}
    assert leaves["t"][2] == (4, 2) and leaves["t"][5] == 32
    assert leaves["a"][5] == 64
    assert d.nbytes == 96


def test_a_torch_function_mode_sees_no_metadata_reads():
    ts = {"a": torch.zeros(3), "b": torch.zeros(2, 2)[:, 0]}
    with CountingMode():
        d = describe(ts)
    check(d)
    assert d.nbytes == 12 + 8  # b is a strided view: 2 floats referenced (spanning 3)


def test_values_of_a_dict_subclass_are_read_without_its_overrides():
    d = describe(HostileDict(a=torch.zeros(2), b="xyz"))
    check(d)
    assert {leaf[0] for leaf in d.leaves} == {"a", "b"} and d.nbytes == 8 + 3


def test_a_list_subclass_is_folded_through_list_itself():
    d = describe({"l": HostileList(["ab", "cde"])})
    check(d)
    assert d.leaves[0][0] == "l[*]" and d.leaves[0][6] == 2 and d.nbytes == 5


# -- bounded cost ---------------------------------------------------------------------
def test_ten_million_int_tuple_is_one_leaf_in_a_few_nodes():
    d = describe(tuple(range(10_000_000)))
    check(d)
    assert d.nodes <= 2 and d.nbytes == 80_000_000


def test_tuple_of_100k_tensors_is_sampled_and_extrapolated():
    ts = tuple(torch.zeros(2) for _ in range(100_000))
    d = describe(ts)
    check(d)
    assert len(d.leaves) == 1 and d.leaves[0][6] == 100_000
    assert d.nbytes == 100_000 * 8
    assert d.nodes <= 2100


def test_nested_lists_stay_under_the_node_budget():
    payload = [[["ab"] * 50 for _ in range(50)] for _ in range(50)]  # 2,550 lists, 125k strings
    d = describe(payload)
    check(d)
    assert d.nodes < 50 + 2500 + 125_000  # sampled, not walked whole
    (leaf,) = d.leaves
    assert leaf[0] == "[*][*][*]" and leaf[6] == pytest.approx(125_000, rel=0.01)
    assert d.nbytes == pytest.approx(250_000, rel=0.01)


def test_many_empty_containers_and_long_keys_stay_bounded():
    d = describe({f"{'k' * 10_000}{i}": {} for i in range(100_000)})
    check(d)
    d = describe({f"{i}{'k' * 1000}": i for i in range(10_000)})
    check(d)
    assert all(len(leaf[0]) <= 60 for leaf in d.leaves)


# -- hypothesis: any mix of builtins, tensors and hostile objects ----------------------
class Marker:
    """Stands for hostile object `i` while hypothesis builds (and compares) the payload."""

    def __init__(self, i: int) -> None:
        self.i = i


def materialize(x, memo):
    """The generated structure with each Marker replaced by its hostile object, sharing kept."""
    if id(x) in memo:
        return memo[id(x)]
    if type(x) is Marker:
        out = hostile_objects()[x.i]
    elif type(x) in (list, HostileList):
        out = type(x)(materialize(v, memo) for v in list.__iter__(x))
    elif type(x) is tuple:
        out = tuple(materialize(v, memo) for v in x)
    elif type(x) in (dict, HostileDict):
        out = type(x)((k, materialize(v, memo)) for k, v in dict.items(x))
    else:
        out = x
    memo[id(x)] = out
    return out


def leaves_strategy():
    return st.one_of(
        st.integers(-10**30, 10**30), st.floats(allow_nan=True), st.text(max_size=20),
        st.binary(max_size=20), st.none(),
        st.builds(lambda n: torch.zeros(n), st.integers(0, 5)),
        st.builds(Marker, st.integers(0, len(hostile_objects()) - 1)),
    )


def grow(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), children, max_size=4),
        st.builds(lambda x, n: [x] * n, children, st.integers(0, 5000)),
        st.builds(lambda x, n: tuple([x] * n), children, st.integers(0, 5000)),
        st.builds(HostileList, st.lists(children, max_size=3)),
        st.builds(HostileDict, st.dictionaries(st.text(max_size=4), children, max_size=3)),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(leaves_strategy(), grow, max_leaves=12))
def test_any_payload_runs_no_hook_and_stays_bounded(structure):
    payload = materialize(structure, {})
    CALLS.clear()
    check(describe(payload))
