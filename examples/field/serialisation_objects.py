"""Per-sample tensors broadcast as Python objects (`broadcast_object_list`, gloo).

A driver rank that hands each step's per-sample advantages to its workers as a
list of small tensors through `torch.distributed.broadcast_object_list`: torch
pickles the list, each 16-byte tensor with its own storage record (~290 bytes),
instead of broadcasting one stacked tensor.

    flowmap trace examples/field/serialisation_objects.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import socket

import torch
import torch.distributed as dist

import flowmap

SAMPLES, STEPS = 64, 3
OVERHEAD = 290  # bytes of pickle around each 16-byte tensor in a list (pickle.dumps, by hand)
# a collective's seams run through its group: driver/rank0 -> group[0,1] -> worker/rank1
EXPECT = {"kind": "serialisation", "seam": "driver -> group[0,1]",
          "bytes_per_step": SAMPLES * OVERHEAD}


def run(rank: int, port: int) -> None:
    flowmap.set_owner("driver" if rank == 0 else "worker")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    for step in range(STEPS):
        flowmap.step(step)
        objs: list[object] = [[torch.rand(4) for _ in range(SAMPLES)]] if rank == 0 else [None]
        dist.broadcast_object_list(objs, src=0)
    dist.destroy_process_group()


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=run, args=(rank, port)) for rank in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
