"""Routed experts as int64 through a multiprocessing queue, where 8 bits hold them.

verl #5240's routing replay: `routed_experts [tokens, layers, topk]` built with
numpy's default integer (int64) and sent to the trainer through a queue. The
ids are 0..63; nothing in the metadata says so, and no counter declares it:
`flowmap trace --values` samples the array's range.

    flowmap trace --values examples/field/wide_ids_queue.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

TOKENS, LAYERS, TOPK, EXPERTS, STEPS = 512, 8, 4, 64, 3
# int64 -> uint8 spares 7 of each 8 bytes
EXPECT = {"kind": "wide_ids", "seam": "rollout -> trainer", "values": True,
          "bytes_per_step": TOKENS * LAYERS * TOPK * 8 * 7 / 8}


def rollout(q: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("rollout")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        q.put({"routed_experts": rng.integers(0, EXPERTS, (TOKENS, LAYERS, TOPK))})


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
