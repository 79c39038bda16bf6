"""Control for the collective every-rank shape: each rank's slot holds only its rows.

The fix of `every_rank_gloo.py` (slime #2385: slice per rank before sending): rank 0
hands `scatter_object_list` rank `r`'s rows, copied, in slot `r`, and each rank keeps
what it got. Two processes, a gloo group over loopback, annotated with `flowmap.owner`
and `flowmap.step` only. No `duplicate` is due.

    flowmap trace examples/field/every_rank_gloo_fixed.py && flowmap report
"""

from __future__ import annotations

import gloo_ranks  # the corpus's rank launcher, beside this script
import torch
import torch.distributed as dist

import flowmap

WORLD, BATCH, TOKENS, STEPS = 2, 64, 512, 3
EXPECT = None


def run(rank: int, port: int) -> None:
    flowmap.set_owner(f"trainer/rank{rank}")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    for step in range(STEPS):
        flowmap.step(step)
        slots = None
        if rank == 0:
            batch = {"input_ids": torch.randint(0, 32000, (BATCH, TOKENS)),
                     "advantages": torch.randn(BATCH, TOKENS)}
            slots = [{k: v[r::WORLD].contiguous() for k, v in batch.items()}  # the fix
                     for r in range(WORLD)]
        got: list[object] = [None]
        dist.scatter_object_list(got, slots, src=0)
        mine = got[0]
        assert mine["input_ids"].shape == (BATCH // WORLD, TOKENS)  # type: ignore[index]
    dist.destroy_process_group()


def main() -> None:
    gloo_ranks.spawn(run, WORLD)


if __name__ == "__main__":
    main()
