"""The rollout pickled once and the same bytes sent down every rank's pipe.

The shape of a controller that serialises a batch itself to save time (`pickle.dumps`
once, then `Connection.send_bytes` to each data-parallel rank), each rank loading it
whole and keeping its contiguous chunk. Raw bytes have no storage to follow: the same
message, byte for byte (its length and checksum), goes to every rank in one step.
Annotated with `flowmap.owner` and `flowmap.step` only. The fix
(`every_rank_serialised_once_fixed.py`): pickle each rank's own chunk.

    flowmap trace examples/field/every_rank_serialised_once.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
from typing import Any

import numpy as np

import flowmap

RANKS, BATCH, TOKENS, STEPS = 4, 32, 512, 3
BATCH_BYTES = BATCH * TOKENS * (8 + 4)  # int64 ids, float32 log-probs (and a pickle's framing)
EXPECT = {"kind": "duplicate", "seam": "controller -> rank0",
          "bytes_per_step": (RANKS - 1) * BATCH_BYTES}


def rank(r: int, conn: Any, chunked: bool) -> None:
    with flowmap.owner(f"rank{r}"):
        for step in range(STEPS):
            flowmap.step(step)
            batch = pickle.loads(conn.recv_bytes())
            mine = batch["input_ids"] if chunked else np.split(batch["input_ids"], RANKS)[r]
            assert mine.shape == (BATCH // RANKS, TOKENS)


def main(chunked: bool = False) -> None:
    ctx = mp.get_context("fork")
    pipes = [ctx.Pipe(False) for _ in range(RANKS)]
    procs = [ctx.Process(target=rank, args=(r, rx, chunked)) for r, (rx, _) in enumerate(pipes)]
    for p in procs:
        p.start()
    rng = np.random.default_rng(0)
    with flowmap.owner("controller"):
        for step in range(STEPS):
            flowmap.step(step)
            batch = {"input_ids": rng.integers(0, 32000, (BATCH, TOKENS)),
                     "logprobs": -rng.random((BATCH, TOKENS), dtype=np.float32)}
            if chunked:  # the fix: each rank's rows, pickled apart
                for r, (_, tx) in enumerate(pipes):
                    tx.send_bytes(pickle.dumps({k: np.split(v, RANKS)[r] for k, v in batch.items()}))
                continue
            blob = pickle.dumps(batch)  # the bug: one blob, whole, to every rank
            for _, tx in pipes:
                tx.send_bytes(blob)
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
