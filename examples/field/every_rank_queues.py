"""The whole batch put on every data-parallel rank's queue; each rank keeps its share.

The shape of THUDM/slime #2384 through per-rank `multiprocessing` queues (OpenRLHF's
`ray.put` per actor group is the same pattern): the driver puts one numpy batch on each
rank's queue, each pickling it whole, and rank `r` keeps rows `r::RANKS`. Annotated with
`flowmap.owner` and `flowmap.step` only. Fix (`every_rank_fixed.py`): put each rank's rows.

    flowmap trace examples/field/every_rank_queues.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import numpy as np

import flowmap

RANKS, BATCH, TOKENS, STEPS = 4, 64, 512, 3
BATCH_BYTES = BATCH * TOKENS * (8 + 4)  # int64 ids + float32 advantages
# every copy but one is extra
EXPECT = {"kind": "duplicate", "seam": "driver -> rank1", "bytes_per_step": (RANKS - 1) * BATCH_BYTES}


def rank(r: int, q: Any) -> None:
    with flowmap.owner(f"rank{r}"):
        for step in range(STEPS):
            flowmap.step(step)
            batch = q.get()
            mine = batch["input_ids"][r::RANKS]  # the rank keeps its share
            assert mine.shape == (BATCH // RANKS, TOKENS)


def main() -> None:
    ctx = mp.get_context("fork")
    queues = [ctx.Queue() for _ in range(RANKS)]
    procs = [ctx.Process(target=rank, args=(r, q)) for r, q in enumerate(queues)]
    for p in procs:
        p.start()
    with flowmap.owner("driver"):
        for step in range(STEPS):
            flowmap.step(step)
            batch = {"input_ids": np.random.randint(0, 32000, (BATCH, TOKENS)),
                     "advantages": np.random.rand(BATCH, TOKENS).astype(np.float32)}
            for q in queues:  # the bug: every rank gets all BATCH rows
                q.put(batch)
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
