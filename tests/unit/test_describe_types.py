"""Each payload type is sized from its content, checked against the library's own figure."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch

import flowmap
from flowmap.capture.describe import describe

MiB = 1024 * 1024


def by_path(desc):
    return {leaf[0]: leaf for leaf in desc.leaves}


# -- numpy ------------------------------------------------------------------------------
def test_object_array_of_strings_counts_their_utf8_content():
    strs = np.array(["héllo", "wörld!", "x" * 100, "日本語"], dtype=object)
    d = describe({"non_tensor_batch": {"raw": strs}})
    expected = sum(len(s.encode()) for s in strs)
    assert d.nbytes == expected == by_path(d)["non_tensor_batch.raw"][5]
    assert by_path(d)["non_tensor_batch.raw"][3] == "object"


def test_a_long_object_array_is_sampled_within_a_percent_and_bounded():
    strs = np.array([f"prompt {i} " * (1 + i % 7) for i in range(200_000)], dtype=object)
    d = describe(strs)
    assert d.nbytes == pytest.approx(sum(len(s.encode()) for s in strs), rel=0.01)
    assert d.nodes <= 2100


def test_memmap_counts_its_mapped_bytes(tmp_path):
    mm = np.memmap(tmp_path / "m.bin", dtype=np.float32, mode="w+", shape=(16 * MiB,))
    d = describe({"mm": mm, "view": mm[: MiB]})
    assert d.nbytes == mm.nbytes == 64 * MiB
    assert by_path(d)["view"][5] == 4 * MiB


def test_broadcast_array_counts_the_buffer_it_references():
    base = np.arange(10, dtype=np.int64)
    wide = np.broadcast_to(base, (1000, 10))
    d = describe({"wide": wide})
    assert d.nbytes == base.nbytes
    d = describe({"wide": wide, "base": base})
    assert d.nbytes == base.nbytes


def test_numpy_and_torch_views_of_one_buffer_count_once():
    a = np.zeros(1000, dtype=np.float32)
    assert describe({"a": a, "t": torch.from_numpy(a)}).nbytes == a.nbytes


# -- torch ------------------------------------------------------------------------------
def test_expanded_tensor_counts_the_storage_it_references():
    e = torch.zeros(1).expand(100_000_000)
    d = describe({"e": e})
    assert d.nbytes == e.untyped_storage().nbytes() == 4
    assert by_path(d)["e"][2] == (100_000_000,)  # the shape stays logical


def test_strided_and_transposed_views():
    x = torch.zeros(1000, 10)
    assert describe(x[::2]).nbytes == x[::2].numel() * 4
    assert describe(x.t()).nbytes == x.nbytes
    assert describe({"a": x[0::2], "b": x[1::2]}).nbytes == x.nbytes


@pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr", "bsc"])
def test_sparse_tensors_count_their_components(layout):
    dense = torch.zeros(8, 8)
    dense[0, 1] = dense[3, 2] = dense[7, 7] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = {"coo": dense.to_sparse, "csr": dense.to_sparse_csr, "csc": dense.to_sparse_csc,
             "bsr": lambda: dense.to_sparse_bsr((2, 2)), "bsc": lambda: dense.to_sparse_bsc((2, 2))
             }[layout]()
        parts = {"coo": lambda: [t._values(), t._indices()],
                 "csr": lambda: [t.values(), t.crow_indices(), t.col_indices()],
                 "bsr": lambda: [t.values(), t.crow_indices(), t.col_indices()],
                 "csc": lambda: [t.values(), t.ccol_indices(), t.row_indices()],
                 "bsc": lambda: [t.values(), t.ccol_indices(), t.row_indices()]}[layout]()
    d = describe({"s": t})
    expected = sum(p.numel() * p.element_size() for p in parts)
    assert d.nbytes == expected == by_path(d)["s"][5] > 0
    assert by_path(d)["s"][1] == f"sparse_{layout}" and by_path(d)["s"][2] == (8, 8)


def test_jagged_nested_tensor_counts_values_and_offsets():
    nt = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(5, 3)], layout=torch.jagged)
    d = describe({"nt": nt})
    expected = nt.values().nbytes + nt.offsets().nbytes
    assert d.nbytes == expected == 7 * 3 * 4 + 3 * 8
    assert by_path(d)["nt"][2] == (2, (2, 5), 3)


def test_strided_nested_tensor_counts_its_buffer_and_metadata():
    comps = [torch.zeros(2, 3), torch.zeros(4, 3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the strided layout is a prototype
        nt = torch.nested.nested_tensor(comps)
    d = describe(nt)
    meta = [nt._nested_tensor_size(), nt._nested_tensor_strides(),
            nt._nested_tensor_storage_offsets()]
    assert d.nbytes == sum(c.nbytes for c in comps) + sum(m.nbytes for m in meta)


def test_distinct_tensors_of_one_hop_get_distinct_storage_ids(tmp_path):
    a, b, c = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    with flowmap.tracing(str(tmp_path / "run")):
        flowmap.hop("x", "y", {"a": a, "b": b, "c": c, "a2": a[:2]}, name="p")
        flowmap.hop("x", "y", {"b": b}, name="q")
    hops = {h.name: h for h in flowmap.load(str(tmp_path / "run")).hops}
    ids = hops["p"].storages
    assert len(ids) == 4 and len(set(ids[:3])) == 3 and ids[3] == ids[0]
    assert hops["q"].storages == (ids[1],)


# -- tabular ----------------------------------------------------------------------------
def test_pyarrow_table_columns_match_pyarrow_nbytes():
    t = pa.table({"x": [1, 2, 3], "text": ["a", "bb", None], "f": [0.5, None, 1.5]})
    d = describe({"t": t})
    paths = by_path(d)
    for name in t.column_names:
        assert paths[f"t.{name}"][5] == t.column(name).nbytes
        assert paths[f"t.{name}"][1] == "arrow"
    assert d.nbytes == t.nbytes
    rb = t.to_batches()[0]
    assert describe(rb).nbytes == rb.nbytes
    assert describe(t.column("x")).nbytes == t.column("x").nbytes


def test_a_pyarrow_slice_counts_its_part():
    t = pa.table({"x": list(range(1000))})
    assert describe(t.slice(0, 100)).nbytes == t.slice(0, 100).nbytes == 800


def test_pandas_columns_are_leaves_with_their_array_bytes():
    df = pd.DataFrame({"a": np.arange(100), "f": np.ones(100, dtype=np.float32),
                       "s": [f"row{i}" for i in range(100)],
                       "o": pd.Series([f"é{i}" for i in range(100)], dtype=object)})
    d = describe({"df": df})
    paths = by_path(d)
    assert paths["df.a"][5] == df["a"].to_numpy().nbytes
    assert paths["df.f"][5] == 400
    assert paths["df.s"][5] == df["s"].array._pa_array.nbytes
    assert paths["df.o"][5] == sum(len(s.encode()) for s in df["o"])
    s = describe(df["a"])
    assert s.nbytes == 800 and s.leaves[0][0] == ""


def test_pandas_non_range_index_is_a_leaf():
    s = pd.Series([1.0, 2.0], index=pd.Index([10, 20]))
    paths = by_path(describe({"s": s}))
    assert paths["s[index]"][5] == 16 and paths["s"][5] == 16


def test_datasets_dataset_is_its_arrow_table():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"prompt": ["a", "bb", "ccc"], "reward": [0.1, 0.2, 0.3]})
    d = describe({"ds": ds})
    assert set(by_path(d)) == {"ds.prompt", "ds.reward"}
    assert d.nbytes == ds.data.table.nbytes
    sel = ds.select([0, 2])
    d = describe(sel)
    assert set(by_path(d)) == {"prompt", "reward", "[indices]"}
    assert d.nbytes == ds.data.table.nbytes + 2 * 8


# -- tensordict -------------------------------------------------------------------------
def test_tensordict_keeps_non_tensor_leaves():
    td_mod = pytest.importorskip("tensordict")
    td = td_mod.TensorDict(
        {"obs": torch.zeros(4, 3), "prompt": td_mod.NonTensorData("héllo"),
         "texts": td_mod.NonTensorStack(td_mod.NonTensorData("ab"), td_mod.NonTensorData("cde")),
         "nested": td_mod.TensorDict({"r": torch.zeros(4)}, batch_size=[4])},
        batch_size=[])
    d = describe({"batch": td})
    paths = by_path(d)
    assert paths["batch.obs"][5] == 48 and paths["batch.nested.r"][5] == 16
    assert paths["batch.prompt"][1] == "str" and paths["batch.prompt"][5] == len("héllo".encode())
    assert paths["batch.texts[*]"][6] == 2 and paths["batch.texts[*]"][5] == 5
    assert d.nbytes == 48 + 16 + 6 + 5
