"""Rollouts put on a queue the trainer stopped draining: sent every step, never received.

The shape of a async off-policy buffer whose consumer was switched off (a `max_staleness`
of 0 that skips the async buffer, tinker-cookbook #822's queue that fills up): each step
the generator puts a batch on the `multiprocessing` queue of an evaluator that takes only
the first. The rest is pickled and written into the pipe for nobody. Annotated with
`flowmap.owner` and `flowmap.step` only. Fix (`unreceived_fixed.py`): stop putting what
nobody takes.

    flowmap trace examples/field/unreceived_queue.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import numpy as np

import flowmap

GROUPS, TOKENS, STEPS = 2, 512, 4  # 8 KiB a batch: all of them fit the pipe's buffer
BATCH = GROUPS * TOKENS * 8  # int64 ids
# STEPS - 1 batches never received, over STEPS steps
EXPECT = {"kind": "unreceived", "seam": "generator -> (untraced)",
          "bytes_per_step": (STEPS - 1) * BATCH / STEPS}


def evaluator(q: Any) -> None:
    with flowmap.owner("evaluator"):
        q.get()  # takes the first batch, then stops reading


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=evaluator, args=(q,))
    p.start()
    with flowmap.owner("generator"):
        for step in range(STEPS):
            flowmap.step(step)
            q.put(np.random.randint(0, 32000, (GROUPS, TOKENS)))
    p.join()


if __name__ == "__main__":
    main()
