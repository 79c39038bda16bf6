"""Control for the never-received shapes: every message put on the queue is taken.

The fix of `unreceived_queue.py`: the evaluator takes every batch the generator puts.
Annotated with `flowmap.owner` and `flowmap.step` only. No `unreceived` finding is due.

    flowmap trace examples/field/unreceived_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import numpy as np

import flowmap

GROUPS, TOKENS, STEPS = 8, 1024, 4
EXPECT = None


def evaluator(q: Any) -> None:
    with flowmap.owner("evaluator"):
        for step in range(STEPS):
            flowmap.step(step)
            assert q.get().shape == (GROUPS, TOKENS)


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=evaluator, args=(q,))
    p.start()
    with flowmap.owner("generator"):
        for step in range(STEPS):
            flowmap.step(step)
            q.put(np.random.randint(0, 32000, (GROUPS, TOKENS), dtype=np.int32))
    p.join()


if __name__ == "__main__":
    main()
