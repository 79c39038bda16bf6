"""Payload description: exact bytes, views counted once, metadata only, hostile objects safe."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np
import pytest
import torch

from flowmap.capture import describe as d
from flowmap.capture.describe import describe

MiB = 1024 * 1024


def leaves_by_path(desc):
    return {leaf[0]: leaf for leaf in desc.leaves}


def test_views_of_one_storage_are_counted_once():
    big = torch.zeros(MiB)  # 4 MiB of float32
    small = torch.zeros(MiB // 4)  # 1 MiB
    desc = describe({"big": big, "small": small, "view": big[: MiB // 2]})
    assert desc.nbytes == 5 * MiB
    paths = leaves_by_path(desc)
    assert paths["view"][5] == 2 * MiB  # the leaf keeps its own size
    assert desc.storages[0] == desc.storages[2] != desc.storages[1]


def test_overlapping_and_disjoint_views_count_their_union():
    base = torch.zeros(1000, dtype=torch.int32)
    desc = describe([base[0:100], base[50:150], base[500:600]])
    assert desc.nbytes == (150 + 100) * 4


def test_tensor_leaf_metadata():
    t = torch.zeros(3, 5, dtype=torch.float16)
    (leaf,) = describe(t).leaves
    path, kind, shape, dtype, device, nbytes, count, dims = leaf
    assert (path, kind, shape, dtype, device, nbytes, count) == ("", "tensor", (3, 5), "float16",
                                                                "cpu", 30, 1)
    assert dims is None


def test_dims_are_attached_by_path():
    desc = describe({"routed_experts": torch.zeros(4, 2, 8, dtype=torch.int32)},
                    {"routed_experts": ("tokens", "layers", "topk")})
    assert desc.leaves[0][7] == ("tokens", "layers", "topk")


def test_meta_tensors_are_described_without_data():
    t = torch.empty(1024, 1024, 16, dtype=torch.bfloat16, device="meta")
    desc = describe({"x": t})
    assert desc.nbytes == 1024 * 1024 * 16 * 2
    assert desc.leaves[0][4] == "meta"


class NoDataTensor(torch.Tensor):
    """A tensor that fails the test if anything reads its data."""

    touched: list[str] = []
    DATA_FUNCS = {"cpu", "numpy", "tolist", "item", "__getitem__", "clone", "to", "__reduce_ex__",
                  "contiguous", "detach", "__repr__", "__format__", "sum"}

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        if name in cls.DATA_FUNCS:
            cls.touched.append(name)
            raise AssertionError(f"payload data accessed through {name}")
        return super().__torch_function__(func, types, args, kwargs or {})


def test_never_touches_tensor_data():
    t = torch.zeros(8, 4).as_subclass(NoDataTensor)
    NoDataTensor.touched.clear()
    desc = describe({"a": t, "nested": [t, t]})
    assert NoDataTensor.touched == []
    assert desc.nbytes == 8 * 4 * 4
    assert all(leaf[1] == "tensor" for leaf in desc.leaves)


def test_numpy_arrays_and_their_views():
    a = np.zeros((100, 10), dtype=np.float64)
    desc = describe({"a": a, "row": a[3], "b": np.ones(7, dtype=np.int8)})
    assert desc.nbytes == a.nbytes + 7
    assert leaves_by_path(desc)["a"][3] == "float64"


def test_lists_fold_into_one_path_with_dim_ranges():
    rows = [{"tokens": torch.zeros(n, dtype=torch.int64), "reward": 1.0} for n in (3, 5, 4)]
    paths = leaves_by_path(describe({"batch": rows}))
    tok = paths["batch[*].tokens"]
    assert tok[2] == ((3, 5),)
    assert tok[5] == 12 * 8
    assert tok[6] == 3
    assert paths["batch[*].reward"][6] == 3


def test_lists_of_numbers_are_sized_without_walking_them():
    desc = describe({"ids": list(range(10_000))})
    (leaf,) = desc.leaves
    assert leaf[0] == "ids[*]" and leaf[6] == 10_000 and desc.nbytes == 80_000


def test_a_list_of_ten_thousand_tensors_is_one_summary_leaf():
    ts = [torch.zeros(2) for _ in range(10_000)]
    desc = describe(ts)
    assert len(desc.leaves) == 1
    assert desc.leaves[0][6] == 10_000
    assert desc.nbytes == 10_000 * 8


def test_dataclasses_namedtuples_and_slots():
    @dataclasses.dataclass
    class Traj:
        tokens: torch.Tensor
        reward: float

    Pair = namedtuple("Pair", "left right")

    class Slotted:
        __slots__ = ("x",)

        def __init__(self) -> None:
            self.x = b"12345"

    paths = leaves_by_path(describe({"t": Traj(torch.zeros(2), 1.0), "p": Pair(1, "ab"),
                                     "s": Slotted()}))
    assert set(paths) >= {"t.tokens", "t.reward", "p.left", "p.right", "s.x"}
    assert paths["s.x"][5] == 5


def test_cycles_are_cut():
    a: dict = {"x": torch.zeros(4)}
    a["self"] = a
    lst: list = []
    lst.append(lst)
    desc = describe({"a": a, "l": lst})
    assert desc.nbytes == 16
    assert leaves_by_path(describe(a))["self"][1] == "ref"


class Hostile:
    def __getattribute__(self, name):
        raise RuntimeError("no attributes for you")


class RaisingLen(list):
    def __len__(self):
        raise RuntimeError("no len")


class RaisingIter(dict):
    def items(self):
        raise RuntimeError("no iteration")

    def __iter__(self):
        raise RuntimeError("no iteration")


class RaisingGetattr:
    def __init__(self) -> None:
        self.ok = 1

    def __getattr__(self, name):
        raise RuntimeError(f"no {name}")


@pytest.mark.parametrize(
    "make", [Hostile, lambda: RaisingLen([1, 2]), lambda: RaisingIter(a=1), RaisingGetattr],
    ids=["getattribute", "len", "iter", "getattr"],
)
def test_hostile_objects_are_opaque_not_fatal(make):
    obj = make()
    desc = describe({"h": obj, "t": torch.zeros(2)})
    kinds = {leaf[0].split(".")[0].split("[")[0]: leaf[1] for leaf in desc.leaves}
    assert kinds["t"] == "tensor"
    assert desc.nbytes >= 8


def test_depth_and_leaf_count_are_bounded():
    deep: dict = {}
    cur = deep
    for _ in range(50):
        cur["n"] = {}
        cur = cur["n"]
    leaves = describe(deep).leaves
    assert len(leaves) == 1 and leaves[0][1] == "opaque"
    wide = {f"k{i}": i for i in range(10_000)}
    assert len(describe(wide).leaves) == d.MAX_LEAVES


def test_strings_and_bytes():
    paths = leaves_by_path(describe({"s": "<img src=x onerror=alert(1)>", "b": b"\x00" * 10}))
    assert paths["s"][5] == 28 and paths["b"][5] == 10


def test_subclasses_of_slotted_dataclasses_keep_their_base_fields():
    @dataclasses.dataclass(slots=True)
    class Base:
        tokens: torch.Tensor

    @dataclasses.dataclass(slots=True)
    class WithReplay(Base):
        routed_experts: torch.Tensor

    paths = leaves_by_path(describe(WithReplay(torch.zeros(4), torch.zeros(4, 2, dtype=torch.int32))))
    assert set(paths) == {"tokens", "routed_experts"}


def test_a_task_bound_to_its_data_is_described_by_its_arguments():
    # GIVEN `pool.map(partial(score, batch), ranks)`: each task pickles the bound batch
    import functools

    def score(batch: dict, rank: int, *, scale: torch.Tensor) -> None:
        raise AssertionError("never called")

    batch = {"ids": torch.zeros(256, 1024, dtype=torch.int32)}
    desc = describe(functools.partial(score, batch, scale=torch.ones(4)))
    # THEN its arguments are its leaves (the function is no data), with their storages
    assert [(leaf[0], leaf[5]) for leaf in desc.leaves] == [("args[0].ids", 1 << 20),
                                                           ("keywords.scale", 16)]
    assert desc.nbytes == (1 << 20) + 16
