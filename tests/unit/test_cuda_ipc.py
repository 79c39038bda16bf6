"""CUDA IPC capture (`cuda_ipc` transport) on what a CPU can run.

The handle pairs are built by hand with the exact parameters of torch's own
`rebuild_cuda_tensor` (checked against its signature, so a torch that changes
them fails here), then recorded in a traced program and read back: one hop
per tensor, its bytes the storage the handle opens, its wire bytes the handles.
The GPU side (real handles from `reduce_tensor`) is tests/gpu/test_cuda_paths.py.
"""

from __future__ import annotations

import inspect
import pickle
import textwrap

import pytest
import torch
import torch.multiprocessing.reductions as reductions
from runs import ShardWriter, tensor

import flowmap
from flowmap.findings import findings
from flowmap.integrations.transports import NAMES, cuda_ipc
from flowmap.seams.spec import TRANSPORTS

HANDLE = bytes(range(64))  # a cudaIpcMemHandle_t is 64 opaque bytes
REF = b"/torch_4242_1234567_0"  # the reference counter's shared-memory file name
EVENT = bytes(64)  # a cudaIpcEventHandle_t


def args(shape=(256, 64), dtype=torch.float32, device=0, handle=HANDLE, offset=0,
         storage_bytes=None, tensor_offset=0):
    """`reduce_tensor`'s args for a CUDA tensor, as torch builds them (reductions.py)."""
    numel = 1
    for n in shape:
        numel *= n
    stride = tuple(int(torch.tensor(shape[i + 1:]).prod()) for i in range(len(shape)))
    size = numel * dtype.itemsize if storage_bytes is None else storage_bytes
    return (torch.Tensor, torch.Size(shape), stride, tensor_offset, torch.storage.TypedStorage,
            dtype, device, handle, size, offset, False, REF, 0, EVENT, True)


def test_the_args_are_torchs_own():
    assert tuple(inspect.signature(reductions.rebuild_cuda_tensor).parameters) == cuda_ipc.ARGS
    assert len(args()) == len(cuda_ipc.ARGS)


def test_a_pair_and_its_bare_args_read_alike():
    a = args((4, 8), torch.bfloat16, device=1)
    for obj in (a, (reductions.rebuild_cuda_tensor, a)):
        h = cuda_ipc.handle_facts(obj)
        assert h is not None
        assert (h.shape, h.dtype, h.device) == ((4, 8), "bfloat16", "cuda:1")
        assert h.view_bytes == h.storage_bytes == 64
        assert h.handle_bytes == len(HANDLE) + len(REF) + len(EVENT) == 149


def test_a_view_opens_its_whole_storage():
    # a (16,) view 1 KiB into a 4 KiB storage: the handle maps all 4 KiB
    h = cuda_ipc.handle_facts(args((16,), storage_bytes=4096, tensor_offset=256))
    assert h is not None and (h.view_bytes, h.storage_bytes) == (64, 4096)


def test_keys_tell_storages_and_views_apart_and_repeat_for_the_same_one():
    same = cuda_ipc.handle_facts(args())
    assert same is not None and same.key == cuda_ipc.handle_facts(args()).key
    others = [args(handle=bytes(64)), args(offset=512), args(tensor_offset=8), args((128, 128))]
    keys = {cuda_ipc.handle_facts(a).key for a in others}
    assert len(keys) == 4 and same.key not in keys


def test_other_tuples_are_not_handles():
    meta = reductions.reduce_tensor(torch.empty(3, 4, device="meta"))  # rebuild_meta_tensor
    cpu_args = list(args())
    cpu_args[7] = "not bytes"
    for obj in (meta, meta[1], tuple(cpu_args), (len, args()), (), (1, 2), None, args()[:-1]):
        assert cuda_ipc.handle_facts(obj) is None


def test_the_name_is_in_every_list_of_transports():
    assert "cuda_ipc" in NAMES and "cuda_ipc" in TRANSPORTS


PROGRAM = textwrap.dedent("""
    import pickle
    import torch
    import torch.multiprocessing.reductions as reductions
    import flowmap
    from flowmap.integrations.transports import cuda_ipc

    from multiprocessing.reduction import ForkingPickler

    ARGS = pickle.loads({args!r})
    # armed by the import hook, before torch registered its reducers: queues use the wrapper
    fn = reductions.rebuild_cuda_tensor
    assert hasattr(fn, "__wrapped__") and hasattr(reductions.reduce_tensor, "__wrapped__")
    assert ForkingPickler._extra_reducers[torch.Tensor] is reductions.reduce_tensor
    # pickle must still find the wrapper by its name
    assert pickle.loads(pickle.dumps(fn)) is fn and fn.__name__ == "rebuild_cuda_tensor"
    # a CPU or meta tensor's reduction is torch's own, untouched, and records nothing
    t = torch.arange(6.0)
    rebuilt = reductions.reduce_tensor(t)
    assert torch.equal(rebuilt[0](*rebuilt[1]), t)
    meta = reductions.reduce_tensor(torch.empty(2, 3, device="meta"))
    assert meta[0] is reductions.rebuild_meta_tensor and meta[0](*meta[1]).shape == (2, 3)
    flowmap.set_owner("trainer/rank0")
    for step in range(2):
        flowmap.step(step)
        for a in ARGS:
            cuda_ipc.sent(a)
        with flowmap.owner("weight_sync"):
            for a in ARGS:
                cuda_ipc.received(a)
""")


def test_a_traced_weight_sync_records_one_hop_per_tensor(tmp_path, run_cli):
    # GIVEN two parameters shared by handle in each of two steps
    shared = [args((256, 64)), args((64,), handle=bytes(range(1, 65)))]
    (tmp_path / "sync.py").write_text(PROGRAM.format(args=pickle.dumps(shared)))
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "sync.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    hops = [h for h in flowmap.load(str(tmp_path / "run")).events.hops
            if h.transport == "cuda_ipc"]
    # THEN each handle is a hop rank0 -> weight_sync, of its storage's bytes, the handles on the wire
    assert len(hops) == 4
    assert {(h.src, h.dst, h.name) for h in hops} == {("trainer/rank0", "weight_sync", "ipc_tensor")}
    param_bytes = 256 * 64 * 4 + 64 * 4
    for step in (0, 1):
        of_step = [h for h in hops if h.step == step]
        assert sum(h.nbytes for h in of_step) == param_bytes
        assert all(h.wire_bytes == 149 for h in of_step)
        assert {h.leaves[0].device for h in of_step} == {"cuda:0"}
        assert sorted(h.leaves[0].shape for h in of_step) == [(64,), (256, 64)]
    # the same handle opens the same storage in every step: identity holds across processes
    assert len({h.storages for h in hops}) == 2
    # a handle copies nothing: payload, not bytes moved
    totals = flowmap.load(str(tmp_path / "run")).view.totals
    assert totals.moved_bytes_per_step_mean == 0 < totals.bytes_per_step_mean


@pytest.mark.parametrize(("transport", "duplicate"), [("cuda_ipc", False), ("pickle", True)])
def test_one_storage_opened_by_two_engines_is_no_duplicate_copy(tmp_path, transport, duplicate):
    # GIVEN one weight storage handed to two engines in each step: by handle, or pickled
    w = ShardWriter(str(tmp_path / "run" / "h-1-0001.flowmap.jsonl"), 1)
    for step in range(2):
        for engine in ("rollout/0", "rollout/1"):
            w.hop(10 * step + len(engine), "trainer/rank0", engine, "weights",
                  [tensor("w", (1024, 1024), device="cuda:0")], storages=(7,), step=step,
                  transport=transport)
    w.close(100)
    found = [f.kind for f in findings(flowmap.load(str(tmp_path / "run")).view)]
    assert ("duplicate" in found) is duplicate


def test_no_transport_cuda_ipc_leaves_torchs_reductions_alone(tmp_path, run_cli):
    (tmp_path / "prog.py").write_text(
        "import torch.multiprocessing.reductions as r\n"
        "assert not hasattr(r.rebuild_cuda_tensor, '__wrapped__')\n"
        "assert not hasattr(r.reduce_tensor, '__wrapped__')\n"
        "print('untouched')\n")
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "--no-transport", "cuda_ipc", "prog.py"],
                cwd=tmp_path)
    assert r.returncode == 0 and "untouched" in r.stdout, r.stderr
