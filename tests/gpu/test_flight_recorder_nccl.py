"""The Flight Recorder's NCCL path: DDP on CUDA under torchrun, read from `_dump_nccl_trace_json`.

Runs only where CUDA is present; NOT YET VERIFIED on a GPU (written on a CPU-only
machine). One rank per GPU, up to two (one GPU: a group of one, whose all-reduce
still runs and is recorded). The figures are checked as on gloo
(tests/integration/test_flight_recorder.py): the bucket all-reduce per step is
the parameters' bytes, and an entry both recorders hold counts once.
"""

from __future__ import annotations

import importlib.util
import socket
from collections import defaultdict

import pytest

import flowmap


def _cuda_devices() -> int:
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


pytestmark = pytest.mark.skipif(_cuda_devices() == 0, reason="needs CUDA (NCCL)")

IN, HIDDEN, OUT, STEPS = 64, 128, 8, 3
PARAM_BYTES = ((IN * HIDDEN + HIDDEN) + (HIDDEN * OUT + OUT)) * 4

TRAIN = f'''
import os, torch, torch.distributed as dist
import flowmap
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(rank)
model = torch.nn.Sequential(torch.nn.Linear({IN}, {HIDDEN}), torch.nn.ReLU(),
                            torch.nn.Linear({HIDDEN}, {OUT})).cuda()
model = DistributedDataParallel(model, device_ids=[rank])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range({STEPS}):
    flowmap.step(step)
    model(torch.randn(4, {IN}, device="cuda")).square().mean().backward()
    opt.step()
    opt.zero_grad()
torch.cuda.synchronize()
dist.destroy_process_group()
'''


def test_ddp_on_nccl_all_reduces_its_buckets_per_step(tmp_path, run_cli):
    world = min(2, _cuda_devices())
    (tmp_path / "train.py").write_text(TRAIN)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_cli(["trace", "-o", str(tmp_path / "run"), "-m", "torch.distributed.run",
                 "--nproc-per-node", str(world), "--master-addr", "127.0.0.1",
                 "--master-port", str(port), "train.py"], cwd=tmp_path, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    run = flowmap.load(str(tmp_path / "run"))
    assert run.health.tracer_errors == 0, run.health.error_messages
    group = "group[0,1]" if world == 2 else "group[0]"
    for rank in range(world):
        per_step: dict = defaultdict(int)
        for h in run.hops:
            if (h.src, h.dst, h.name) == (f"rank{rank}", group, "all_reduce"):
                per_step[h.step] += h.nbytes
                assert h.leaves[0].device == "cuda"
        assert dict(per_step) == {s: PARAM_BYTES for s in range(STEPS)}
