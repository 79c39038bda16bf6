"""Control for chatty: one message per GRPO group, 16 a step (mp.Queue, torch, shared memory).

Each group is `{"prompt": int32 [P], "responses": int32 [8, R], "rewards": float32 [8]}`;
the toy sampler draws the same lengths each step (seeded per step), so every step sends
the same set of shapes. A group is the pipeline's unit: nothing to bucket.
"""
import multiprocessing as mp
import random

import torch

import flowmap

EXPECT = None
STEPS = 4
GROUPS = 16


def group(rng: random.Random) -> dict:
    p, r = rng.randint(20, 80), rng.randint(30, 200)
    return {"prompt": torch.randint(0, 32000, (p,), dtype=torch.int32),
            "responses": torch.randint(0, 32000, (8, r), dtype=torch.int32),
            "rewards": torch.rand(8)}


def sampler(q, done) -> None:
    flowmap.set_owner("sampler")
    for step in range(STEPS):
        flowmap.step(step)
        rng = random.Random(0)
        for _ in range(GROUPS):
            q.put(group(rng))
    done.wait()


def main() -> None:
    flowmap.set_owner("learner")
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=sampler, args=(q, done))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(GROUPS):
            q.get()
    done.set()
    p.join()


if __name__ == "__main__":
    main()
