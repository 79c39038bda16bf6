"""The whole batch broadcast to every rank (`torch.distributed.broadcast`, gloo); each keeps its rows.

slime #2385's shape through a tensor collective: rank 0 holds the step's token
ids, `dist.broadcast` gives every rank the whole `[B, T]` block, and each rank
slices its `B / world` rows, scores them and gathers its per-token logprobs back
to rank 0. Two processes, a gloo group over loopback, annotated with
`flowmap.owner` and `flowmap.step` only. The fix (`every_rank_broadcast_fixed.py`):
`dist.scatter` each rank its rows.

    flowmap trace examples/field/every_rank_broadcast.py && flowmap report
"""

from __future__ import annotations

import gloo_ranks  # the corpus's rank launcher, beside this script
import torch
import torch.distributed as dist

import flowmap

WORLD, BATCH, TOKENS, VOCAB, STEPS = 2, 64, 512, 32000, 3
BATCH_BYTES = BATCH * TOKENS * 8  # int64 token ids
# each rank but the root got the whole batch and needed 1/WORLD of it
EXPECT = {"kind": "duplicate", "seam": "trainer -> group[0,1]",
          "bytes_per_step": (WORLD - 1) * BATCH_BYTES * (WORLD - 1) / WORLD}


def run(rank: int, port: int) -> None:
    flowmap.set_owner(f"trainer/rank{rank}")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    head = torch.randn(VOCAB // 64, 64)  # a stand-in scorer, the same on every rank
    rows = BATCH // WORLD
    for step in range(STEPS):
        flowmap.step(step)
        if rank == 0:
            ids = torch.randint(0, VOCAB, (BATCH, TOKENS))
        else:
            ids = torch.empty(BATCH, TOKENS, dtype=torch.int64)
        dist.broadcast(ids, src=0)  # the bug: every rank gets every row
        mine = ids[rank * rows:(rank + 1) * rows]
        logprobs = torch.log_softmax(head[mine % head.shape[0]].sum(-1), dim=-1)
        gathered = [torch.empty_like(logprobs) for _ in range(WORLD)] if rank == 0 else None
        dist.gather(logprobs, gathered, dst=0)
    dist.destroy_process_group()


def main() -> None:
    gloo_ranks.spawn(run, WORLD)


if __name__ == "__main__":
    main()
