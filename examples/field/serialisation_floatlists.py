"""Per-sample logprobs and values as Python lists of floats (mp.Queue, pickle, no tensors).

A scorer sends `{"logprobs": [[float] * L for each of 32 samples], "values": [...]}`,
from float32 tensors' `.tolist()`: pickle writes 9 B a float where a float32 array holds
4. By hand: 32 samples x 64 floats x 2 lists = 4,096 floats: wire 37,164 B, own 16,384 B,
2 messages a step.
"""
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
PER_STEP = 2
EXPECT = {"kind": "serialisation", "seam": "scorer -> learner", "bytes_per_step": 41560}


def message() -> dict:
    lp = -torch.rand(32, 64)
    v = torch.randn(32, 64)
    return {"logprobs": lp.tolist(), "values": v.tolist()}


def scorer(q, done) -> None:
    flowmap.set_owner("scorer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            q.put(message())
    done.wait()


def main() -> None:
    flowmap.set_owner("learner")
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=scorer, args=(q, done))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(PER_STEP):
            q.get()
    done.set()
    p.join()


if __name__ == "__main__":
    main()
