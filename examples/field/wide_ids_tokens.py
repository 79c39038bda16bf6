"""Token ids of a 32k vocabulary sent as int64 (mp.Queue, a dict, torch, shared memory).

`{"input_ids": int64 [16, 256] (< 32,000), "rewards": float32 [16]}`, one a step; only
`flowmap trace --values` sees the range. By hand: 32,768 B of ids a step; int16 holds
them: 32,768 x 3/4 = 24,576 B/step.
"""
import multiprocessing as mp

import torch

import flowmap

STEPS = 4
EXPECT = {"kind": "wide_ids", "seam": "generator -> trainer", "bytes_per_step": 24576,
          "values": True}


def generator(q, done) -> None:
    flowmap.set_owner("generator")
    for step in range(STEPS):
        flowmap.step(step)
        q.put({"input_ids": torch.randint(0, 32000, (16, 256)), "rewards": torch.rand(16)})
    done.wait()


def main() -> None:
    flowmap.set_owner("trainer")
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=generator, args=(q, done))
    p.start()
    for step in range(STEPS):
        flowmap.step(step)
        q.get()
    done.set()
    p.join()


if __name__ == "__main__":
    main()
