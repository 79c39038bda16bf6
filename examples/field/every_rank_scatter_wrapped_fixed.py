"""Control for every_rank_scatter_wrapped.py: each slot wraps its own rank's rows."""
import os

import torch
import torch.distributed as dist
from gloo_ranks import spawn

import flowmap

STEPS = 3
W = 2
EXPECT = None


def run(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=W)
    with flowmap.owner(f"trainer/rank{rank}"):
        for s in range(STEPS):
            flowmap.step(s)
            slots = None
            if rank == 0:
                ids = torch.randint(0, 32000, (64, 1024))
                slots = [{"rank": 0, "world": 1, "input_ids": ids[r::W].clone()} for r in range(W)]
            box = [None]
            dist.scatter_object_list(box, slots, src=0)
            mine = box[0]["input_ids"][box[0]["rank"]::box[0]["world"]]
            loss = (mine.float() / 32000).mean()
            dist.all_reduce(loss)
    dist.destroy_process_group()


if __name__ == "__main__":
    spawn(run, W)
