"""Control for the object-broadcast every-rank shape: rank 0 sends each rank its rows only.

The fix of `every_rank_broadcast_objects.py`: rank 0 keeps its stride of the
batch and sends every other rank its own with `send_object_list` (each rank then
computes per-token log-probabilities and returns them with `gather_object`, as
before). Two processes, a gloo group over loopback, annotated with
`flowmap.owner` and `flowmap.step` only. No `duplicate` is due.

    flowmap trace examples/field/every_rank_objects_fixed.py && flowmap report
"""

from __future__ import annotations

from typing import Any

import gloo_ranks  # the corpus's rank launcher, beside this script
import torch
import torch.distributed as dist

import flowmap

WORLD, BATCH, TOKENS, STEPS = 2, 64, 512, 3
EXPECT = None


def run(rank: int, port: int) -> None:
    flowmap.set_owner(f"learner/rank{rank}")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    for step in range(STEPS):
        flowmap.step(step)
        box: list[Any] = [None]
        if rank == 0:
            batch = {"input_ids": torch.randint(0, 32000, (BATCH, TOKENS)),
                     "advantages": torch.randn(BATCH, TOKENS)}
            for r in range(1, WORLD):  # the fix: each rank's stride, copied, to that rank
                dist.send_object_list([{k: v[r::WORLD].clone() for k, v in batch.items()}],
                                      dst=r)
            box[0] = {k: v[0::WORLD] for k, v in batch.items()}
        else:
            dist.recv_object_list(box, src=0)
        mine = box[0]
        logprobs = torch.log_softmax(mine["input_ids"].float() * 1e-4, dim=-1) * mine["advantages"]
        out: list[Any] | None = [None] * WORLD if rank == 0 else None
        dist.gather_object({"logprobs": logprobs}, out, dst=0)
    dist.destroy_process_group()


def main() -> None:
    gloo_ranks.spawn(run, WORLD)


if __name__ == "__main__":
    main()
