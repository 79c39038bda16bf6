"""One batch broadcast whole as two tensors (`dist.broadcast` each, gloo); each rank keeps its rows.

The root broadcasts the rollout batch's token ids `int64 [16, 512]` and advantages
`float32 [16, 512]` one after the other; each rank keeps its 8 rows of both, computes a
per-row loss `[8]` and sends it back to rank 0 (`dist.send`). The loss's rows show the
rank worked on its part of both broadcasts, though the loss is of neither's dtype. The
fix: scatter each rank its rows (`every_rank_broadcast_fixed.py`).
By hand: each rank but the root receives (1 - 1/2) x (65,536 + 32,768) B beyond its part.

    flowmap trace examples/field/every_rank_broadcast_pair.py && flowmap report
"""

from __future__ import annotations

import gloo_ranks  # the corpus's rank launcher, beside this script
import torch
import torch.distributed as dist

import flowmap

WORLD, BATCH, TOKENS, STEPS = 2, 16, 512, 4
EXPECT = {"kind": "duplicate", "seam": "worker -> group[0,1]",
          "bytes_per_step": (BATCH * TOKENS * (8 + 4)) // WORLD}


def run(rank: int, port: int) -> None:
    flowmap.set_owner(f"worker/rank{rank}")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    weight = torch.randn(TOKENS) * 0.01
    for step in range(STEPS):
        flowmap.step(step)
        if rank == 0:
            tokens, adv = torch.randint(0, 32000, (BATCH, TOKENS)), torch.randn(BATCH, TOKENS)
        else:
            tokens, adv = torch.empty(BATCH, TOKENS, dtype=torch.int64), torch.empty(BATCH, TOKENS)
        dist.broadcast(tokens, src=0)
        dist.broadcast(adv, src=0)
        rows = slice(rank * BATCH // WORLD, (rank + 1) * BATCH // WORLD)
        loss = (adv[rows] * weight).sum(1) + (tokens[rows] % 7).float().mean(1) * 0.0
        if rank == 0:
            other = torch.empty(BATCH // WORLD)
            dist.recv(other, src=1)
        else:
            dist.send(loss.contiguous(), dst=0)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    gloo_ranks.spawn(run, WORLD)


if __name__ == "__main__":
    main()
