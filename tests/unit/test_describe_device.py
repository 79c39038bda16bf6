"""Describing tensors that are not in host memory, on a CPU: `meta` tensors and IPC handle tuples.

A meta tensor is what a CUDA tensor looks like to the describer without a
GPU: shape, dtype and device, a storage, and no host bytes. Its `data_ptr` is
no address (0, or the view's offset alone), so identity must come from the
storage itself, and nothing may touch data: no aten op runs while describing
(a TorchDispatchMode sees every one, `.item()` and `.cpu()` included).
"""

from __future__ import annotations

import torch
import torch.multiprocessing.reductions as reductions
from torch.utils._python_dispatch import TorchDispatchMode

from flowmap.capture.describe import describe
from flowmap.capture.describers import torch_, walk


class OpLog(TorchDispatchMode):
    """Every aten op that runs meanwhile: a device sync (.item(), .cpu(), .tolist()) is one."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_leaves_say_shape_dtype_and_device():
    d = describe({"logits": _meta(8, 32, dtype=torch.bfloat16), "ids": _meta(8, dtype=torch.int64)})
    assert [leaf[:6] for leaf in d.leaves] == [
        ("logits", "tensor", (8, 32), "bfloat16", "meta", 8 * 32 * 2),
        ("ids", "tensor", (8,), "int64", "meta", 64)]
    assert d.nbytes == 8 * 32 * 2 + 64


def test_meta_tensors_never_share_an_identity_and_their_views_count_once():
    a, b = _meta(1000), _meta(1000)
    # a view at an offset has data_ptr == its offset alone (1000): the same for a and b
    assert a[250:].data_ptr() == b[250:].data_ptr() != 0
    d = describe({"a": a, "a_head": a[:500], "a_mid": a[250:750], "b_tail": b[250:]})
    assert d.nbytes == 4000 + 3000  # a's views inside a; b's tail its own
    sa, s_head, s_mid, sb = d.storages
    assert sa == s_head and len({sa, s_mid, sb}) == 3
    # two descriptions of one tensor name the same storage; another tensor, another one
    assert describe(a).storages == describe(a).storages != describe(b).storages


def test_no_aten_op_runs_while_describing():
    payload = {"x": _meta(4, 4), "view": _meta(16)[3:], "strided": _meta(4, 4).t(),
               "nested": [[_meta(2), _meta(3)]], "empty": _meta(0)}
    with OpLog() as log:
        d = describe(payload)
    assert log.ops == [] and d.nbytes > 0


def test_the_c_loop_declines_meta_tensors_and_the_python_loop_agrees():
    payload = {f"t{i}": _meta(4, i + 1)[i:] for i in range(5)} | {"cpu": torch.zeros(3)}
    fast = describe(payload)
    saved = torch_.tensor_entries, walk.disjoint_total
    torch_.tensor_entries = walk.disjoint_total = None
    try:
        pure = describe(payload)
    finally:
        torch_.tensor_entries, walk.disjoint_total = saved
    assert (fast.leaves, fast.nbytes, fast.storages) == (pure.leaves, pure.nbytes, pure.storages)
    assert {leaf[4] for leaf in fast.leaves} == {"meta", "cpu"}


def test_an_ipc_handle_is_described_as_the_handle_not_the_tensor():
    # `reduce_tensor`'s pair for a 64 MiB CUDA tensor, built by hand with torch's parameters
    args = (torch.Tensor, torch.Size([4096, 4096]), (4096, 1), 0, torch.storage.TypedStorage,
            torch.float32, 0, bytes(64), 4096 * 4096 * 4, 0, False, b"/torch_1_2_0", 0, bytes(64),
            True)
    with OpLog() as log:
        d = describe({"weight": (reductions.rebuild_cuda_tensor, args)})
    assert log.ops == []
    assert d.nbytes < 1024  # what travels: the handles and a few ints, not the 64 MiB
    assert not any(leaf[1] == "tensor" for leaf in d.leaves)


def test_a_meta_tensors_own_reduction_describes_alike():
    t = _meta(3, 5)
    fn, args = reductions.reduce_tensor(t)
    assert fn is reductions.rebuild_meta_tensor
    assert describe(fn(*args)).leaves == describe(t).leaves
