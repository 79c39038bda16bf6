"""The whole batch scattered to every rank through `torch.distributed` (gloo); each keeps a part.

A port of per-rank queues to collectives (slime #2385's shape, the data sent whole
to every rank then sliced there): rank 0 hands `scatter_object_list` the same batch
in every rank's slot, and each rank keeps only its rows. Two processes, a gloo
group over loopback, annotated with `flowmap.owner` and `flowmap.step` only.
The fix (`every_rank_gloo_fixed.py`): each slot holds that rank's rows.

    flowmap trace examples/field/every_rank_gloo.py && flowmap report
"""

from __future__ import annotations

import gloo_ranks  # the corpus's rank launcher, beside this script
import torch
import torch.distributed as dist

import flowmap

WORLD, BATCH, TOKENS, STEPS = 2, 64, 512, 3
BATCH_BYTES = BATCH * TOKENS * (8 + 4)  # int64 ids and float32 advantages
# a collective's seams run through its group: trainer/rank0 -> group[0,1]; each rank but the
# root receives the batch whole and keeps 1/WORLD of it
EXPECT = {"kind": "duplicate", "seam": "trainer -> group[0,1]",
          "bytes_per_step": (WORLD - 1) * BATCH_BYTES * (WORLD - 1) // WORLD}


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
            slots = [batch] * WORLD  # the bug: every rank's slot holds the whole batch
        got: list[object] = [None]
        dist.scatter_object_list(got, slots, src=0)
        mine = {k: v[rank::WORLD] for k, v in got[0].items()}  # type: ignore[union-attr]
        assert mine["input_ids"].shape == (BATCH // WORLD, TOKENS)
    dist.destroy_process_group()


def main() -> None:
    gloo_ranks.spawn(run, WORLD)


if __name__ == "__main__":
    main()
