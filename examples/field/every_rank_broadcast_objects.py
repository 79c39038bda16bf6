"""The whole rollout batch broadcast as objects (`broadcast_object_list`, gloo); each rank keeps a stride.

The controller-rank pattern of single-controller trainers without per-rank
chunking: rank 0 holds the step's batch (a dict of token ids and advantages),
`broadcast_object_list` pickles it to every rank whole, and each rank takes
every `world`-th row, computes per-token log-probabilities for them and returns
them with `gather_object`. Two processes, a gloo group over loopback, annotated
with `flowmap.owner` and `flowmap.step` only. The fix
(`every_rank_objects_fixed.py`): send each rank its rows only.

    flowmap trace examples/field/every_rank_broadcast_objects.py && flowmap report
"""

from __future__ import annotations

from typing import Any

import gloo_ranks  # the corpus's rank launcher, beside this script
import torch
import torch.distributed as dist

import flowmap

WORLD, BATCH, TOKENS, STEPS = 2, 64, 512, 3
BATCH_BYTES = BATCH * TOKENS * (8 + 4)  # int64 ids and float32 advantages
# each rank but the root got the whole batch and needed 1/WORLD of it
EXPECT = {"kind": "duplicate", "seam": "learner -> group[0,1]",
          "bytes_per_step": (WORLD - 1) * BATCH_BYTES * (WORLD - 1) / WORLD}


def run(rank: int, port: int) -> None:
    flowmap.set_owner(f"learner/rank{rank}")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    for step in range(STEPS):
        flowmap.step(step)
        box: list[Any] = [None]
        if rank == 0:
            box[0] = {"input_ids": torch.randint(0, 32000, (BATCH, TOKENS)),
                      "advantages": torch.randn(BATCH, TOKENS)}
        dist.broadcast_object_list(box, src=0)  # the bug: the whole batch to every rank
        mine = {k: v[rank::WORLD] for k, v in box[0].items()}
        logprobs = torch.log_softmax(mine["input_ids"].float() * 1e-4, dim=-1) * mine["advantages"]
        out: list[Any] | None = [None] * WORLD if rank == 0 else None
        dist.gather_object({"logprobs": logprobs}, out, dst=0)
    dist.destroy_process_group()


def main() -> None:
    gloo_ranks.spawn(run, WORLD)


if __name__ == "__main__":
    main()
