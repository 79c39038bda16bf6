"""Control for the every-rank shapes: each rank's queue gets only that rank's rows.

The fix of `every_rank_queues.py` (slime #2385: slice per rank before sending): the driver
puts `batch[r::RANKS]`, copied, on rank `r`'s queue. Annotated with `flowmap.owner` and
`flowmap.step` only. No `duplicate` is due.

    flowmap trace examples/field/every_rank_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import numpy as np

import flowmap

RANKS, BATCH, TOKENS, STEPS = 4, 64, 512, 3
EXPECT = None


def rank(r: int, q: Any) -> None:
    with flowmap.owner(f"rank{r}"):
        for step in range(STEPS):
            flowmap.step(step)
            mine = q.get()
            assert mine["input_ids"].shape == (BATCH // RANKS, TOKENS)


def main() -> None:
    ctx = mp.get_context("fork")
    queues = [ctx.Queue() for _ in range(RANKS)]
    procs = [ctx.Process(target=rank, args=(r, q)) for r, q in enumerate(queues)]
    for p in procs:
        p.start()
    with flowmap.owner("driver"):
        for step in range(STEPS):
            flowmap.step(step)
            batch = {"input_ids": np.random.randint(0, 32000, (BATCH, TOKENS), dtype=np.int32),
                     "advantages": np.random.rand(BATCH, TOKENS).astype(np.float32)}
            for r, q in enumerate(queues):  # the fix: each rank its rows
                q.put({k: np.ascontiguousarray(v[r::RANKS]) for k, v in batch.items()})
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
