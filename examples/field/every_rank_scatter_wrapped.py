"""scatter_object_list where each rank's slot is its own small dict that wraps the same
whole batch (and the rank's index): every rank gets the whole batch and reads its stride.

Hand figure: ids torch int64[64,1024] = 524,288 B whole in each of the 2 slots, where each
rank needed half of it: rank 1 receives 524,288 B for a 262,144 B part, 262,144 B/step extra
(rank 0's own slot never leaves it).
Expected: duplicate on rank0 -> group[0,1] scatter_object_list, ~262 KB/step.
"""
import os

import torch
import torch.distributed as dist
from gloo_ranks import spawn

import flowmap

STEPS = 3
W = 2
EXPECT = {"kind": "duplicate", "seam": "trainer -> group[0,1]", "bytes_per_step": (W - 1) * 64 * 1024 * 8 // W}


def run(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=W)
    with flowmap.owner(f"trainer/rank{rank}"):
        for s in range(STEPS):
            flowmap.step(s)
            slots = None
            if rank == 0:
                ids = torch.randint(0, 32000, (64, 1024))
                slots = [{"rank": r, "world": W, "input_ids": ids} for r in range(W)]
            box = [None]
            dist.scatter_object_list(box, slots, src=0)
            mine = box[0]["input_ids"][box[0]["rank"]::box[0]["world"]]
            loss = (mine.float() / 32000).mean()
            dist.all_reduce(loss)
    dist.destroy_process_group()


if __name__ == "__main__":
    spawn(run, W)
