"""The last token's hidden state sent through a `SimpleQueue` as a slice of the whole sequence.

pytorch/pytorch #65604's shape through `multiprocessing.SimpleQueue`: a value-head worker
sends the critic `hidden[:, -1]` of each step's `[batch, seq, dim]` hidden states, a strided
view whose storage is every position; torch moves the whole storage into shared memory.
Annotated with `flowmap.owner` and `flowmap.step` only. Fix: `hidden[:, -1].clone()`.

    flowmap trace examples/field/view_simple_queue.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import torch

import flowmap

BATCH, SEQ, DIM, STEPS = 8, 256, 512, 3
VIEW = BATCH * DIM * 4
EXPECT = {"kind": "view", "seam": "value_head -> critic",
          "bytes_per_step": BATCH * SEQ * DIM * 4 - VIEW}


def critic(q: Any, done: Any) -> None:
    with flowmap.owner("critic"):
        for step in range(STEPS):
            flowmap.step(step)
            last = q.get()
            assert last.shape == (BATCH, DIM)
        done.set()


def main() -> None:
    ctx = mp.get_context("fork")
    q, done = ctx.SimpleQueue(), ctx.Event()
    p = ctx.Process(target=critic, args=(q, done))
    p.start()
    with flowmap.owner("value_head"):
        for step in range(STEPS):
            flowmap.step(step)
            hidden = torch.randn(BATCH, SEQ, DIM)
            q.put(hidden[:, -1])  # the bug: the view carries every position
    done.wait()
    p.join()


if __name__ == "__main__":
    main()
