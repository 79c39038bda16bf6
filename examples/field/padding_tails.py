"""A padded batch with no mask: rows right-padded with zeros to a fixed length.

A rollout worker that ships `input_ids` and `logprobs` as `[batch, max_len]`
arrays, zero-padded, and no attention mask (the trainer recomputes it from
`input_ids != 0`), through a `multiprocessing` queue. Nothing in the metadata
says which positions are padding: `flowmap trace --values` samples the arrays
and sees each row's zero tail.

    flowmap trace --values examples/field/padding_tails.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

BATCH, MAX_LEN, STEPS = 8, 1024, 3
LENGTHS = (130, 412, 97, 1024, 300, 256, 64, 700)
# padded positions, 8 B id + 4 B log-prob each
EXPECT = {"kind": "padding", "seam": "rollout -> trainer", "values": True,
          "bytes_per_step": (BATCH * MAX_LEN - sum(LENGTHS)) * 12}


def rollout(q: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("rollout")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        ids = np.zeros((BATCH, MAX_LEN), dtype=np.int64)
        logprobs = np.zeros((BATCH, MAX_LEN), dtype=np.float32)
        for row, n in enumerate(LENGTHS):
            ids[row, :n] = rng.integers(1, 151_000, n)
            logprobs[row, :n] = -rng.random(n)
        q.put({"input_ids": ids, "logprobs": logprobs})


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=rollout, args=(q,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        q.get()
    p.join()


if __name__ == "__main__":
    main()
