"""A view through an object collective: `broadcast_object_list` pickles its whole storage.

The learner shares the first 16 rows of its advantage buffer, `float32 [2048, 256]`
(2 MiB, recomputed each step), with `broadcast_object_list([{"adv": adv[:16]}])`;
pickling the view ships the whole storage to every rank. The fix is `adv[:16].clone()`.
By hand: 2,097,152 - 16 x 256 x 4 = 2,080,768 B/step.

    flowmap trace examples/field/view_object_collective.py && flowmap report
"""

from __future__ import annotations

import gloo_ranks  # the corpus's rank launcher, beside this script
import torch
import torch.distributed as dist

import flowmap

WORLD, STEPS = 2, 4
EXPECT = {"kind": "view", "seam": "learner -> group[0,1]",
          "bytes_per_step": 2048 * 256 * 4 - 16 * 256 * 4}


def run(rank: int, port: int) -> None:
    flowmap.set_owner("learner" if rank == 0 else "critic")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    for step in range(STEPS):
        flowmap.step(step)
        obj: list[object] = [{"adv": torch.randn(2048, 256)[:16]}] if rank == 0 else [None]
        dist.broadcast_object_list(obj, src=0)
        assert obj[0]["adv"].shape == (16, 256)  # type: ignore[index]
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    gloo_ranks.spawn(run, WORLD)


if __name__ == "__main__":
    main()
