"""Weight sync as one `torch.distributed` broadcast per parameter (gloo).

open-instruct #1535's shape with collectives: the trainer rank broadcasts every
parameter on its own to the rollout rank, instead of flattening them into a
few buckets. Two processes, a gloo group over loopback.

    flowmap trace examples/field/chatty_gloo.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import socket

import torch
import torch.distributed as dist

import flowmap

LAYERS, HIDDEN, STEPS = 10, 32, 3
PARAMS = LAYERS * 2 + 1  # weight and norm per layer, and the head
# a collective's seams run through its group: trainer/rank0 -> group[0,1] -> rollout/rank1
EXPECT = {"kind": "chatty", "seam": "trainer -> group[0,1]",
          "bytes_per_step": (PARAMS - 1) * 64 * 1024}


def shapes() -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    for _ in range(LAYERS):
        out += [(HIDDEN, HIDDEN), (HIDDEN,)]
    return [*out, (100, HIDDEN)]


def run(rank: int, port: int) -> None:
    flowmap.set_owner("trainer" if rank == 0 else "rollout")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    params = [torch.randn(s) if rank == 0 else torch.empty(s) for s in shapes()]
    for step in range(STEPS):
        flowmap.step(step)
        for p in params:  # the bug: one collective per parameter
            dist.broadcast(p, src=0)
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
