"""Control for the broadcast every-rank shape: rank 0 scatters each rank its rows.

The fix of `every_rank_broadcast.py`: `dist.scatter` hands rank `r` its
`B / world` rows of token ids, and each rank scores them and gathers its
per-token logprobs back to rank 0, as before. Two processes, a gloo group over
loopback, annotated with `flowmap.owner` and `flowmap.step` only. No
`duplicate` is due.

    flowmap trace examples/field/every_rank_broadcast_fixed.py && flowmap report
"""

from __future__ import annotations

import gloo_ranks  # the corpus's rank launcher, beside this script
import torch
import torch.distributed as dist

import flowmap

WORLD, BATCH, TOKENS, VOCAB, STEPS = 2, 64, 512, 32000, 3
EXPECT = None


def run(rank: int, port: int) -> None:
    flowmap.set_owner(f"trainer/rank{rank}")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    head = torch.randn(VOCAB // 64, 64)
    rows = BATCH // WORLD
    for step in range(STEPS):
        flowmap.step(step)
        parts = None
        if rank == 0:
            ids = torch.randint(0, VOCAB, (BATCH, TOKENS))
            parts = list(ids.chunk(WORLD))  # the fix: each rank's rows only
        mine = torch.empty(rows, TOKENS, dtype=torch.int64)
        dist.scatter(mine, parts, src=0)
        logprobs = torch.log_softmax(head[mine % head.shape[0]].sum(-1), dim=-1)
        gathered = [torch.empty_like(logprobs) for _ in range(WORLD)] if rank == 0 else None
        dist.gather(logprobs, gathered, dst=0)
    dist.destroy_process_group()


def main() -> None:
    gloo_ranks.spawn(run, WORLD)


if __name__ == "__main__":
    main()
