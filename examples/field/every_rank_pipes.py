"""The whole rollout sent down every rank's pipe as torch tensors, each rank slicing its part.

The shape of verl's single-controller dispatch without `DP_COMPUTE_PROTO` chunking (and of
slime #2384): the controller sends the same dict of tensors through one `Pipe` per rank;
torch's reducers move each tensor's storage through shared memory and every rank maps it
whole, then takes its contiguous chunk. Annotated with `flowmap.owner` and `flowmap.step`
only. Fix: send `chunk(r)` cloned per rank (`every_rank_fixed.py` shows it on queues).

    flowmap trace examples/field/every_rank_pipes.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import torch

import flowmap

RANKS, BATCH, TOKENS, STEPS = 4, 32, 1024, 3
BATCH_BYTES = BATCH * TOKENS * (8 + 4 + 1)  # int64 ids, float32 logprobs, bool mask
EXPECT = {"kind": "duplicate", "seam": "controller -> rank0",
          "bytes_per_step": (RANKS - 1) * BATCH_BYTES}


def rank(r: int, conn: Any, done: Any) -> None:
    with flowmap.owner(f"rank{r}"):
        for step in range(STEPS):
            flowmap.step(step)
            batch = conn.recv()
            mine = batch["input_ids"].chunk(RANKS)[r]
            assert mine.shape == (BATCH // RANKS, TOKENS)
        done.wait()


def main() -> None:
    ctx = mp.get_context("fork")
    done = ctx.Event()
    pipes = [ctx.Pipe(False) for _ in range(RANKS)]
    procs = [ctx.Process(target=rank, args=(r, rx, done)) for r, (rx, _) in enumerate(pipes)]
    for p in procs:
        p.start()
    with flowmap.owner("controller"):
        for step in range(STEPS):
            flowmap.step(step)
            batch = {"input_ids": torch.randint(0, 32000, (BATCH, TOKENS)),
                     "logprobs": torch.randn(BATCH, TOKENS),
                     "mask": torch.ones(BATCH, TOKENS, dtype=torch.bool)}
            for _, tx in pipes:  # the bug: the whole batch to every rank
                tx.send(batch)
    done.set()
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
