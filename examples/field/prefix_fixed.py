"""Control for `prefix_resend`: each turn sends only its new tokens (the fix applied).

The agent loop of `prefix_queue.py`, fixed the way sglang #24851 was: the
engine returns the new turn's ids and log-probs only, and the agent loop keeps
the prefix. Turn lengths vary (sampled), four conversations interleaved.
flowmap must not call this a resent prefix.

    flowmap trace examples/field/prefix_fixed.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp
import random

import numpy as np

import flowmap

CONVERSATIONS, TURNS, STEPS = 4, 4, 3
EXPECT = None


def engine(q: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("engine")
    rng = random.Random(7)
    np_rng = np.random.default_rng(7)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(TURNS * CONVERSATIONS):
            n = rng.randint(60, 400)  # this turn's new tokens only
            q.put({"token_ids": np_rng.integers(0, 151_000, n, dtype=np.int64),
                   "logprobs": np.zeros(n, dtype=np.float32)})


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=engine, args=(q,))
    p.start()
    flowmap.set_owner("agent_loop")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(TURNS * CONVERSATIONS):
            q.get()
    p.join()


if __name__ == "__main__":
    main()
