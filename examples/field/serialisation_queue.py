"""Per-token numpy arrays pickled through a multiprocessing queue.

A reward worker that returns one small array per token (a per-token reward or
value head output, built in a Python loop) instead of one array per sample:
each 4-byte element is pickled as a whole numpy array, its dtype and shape
header included (~30 bytes in a list, where pickle shares the dtype). Through a plain `multiprocessing.Queue`.

    flowmap trace examples/field/serialisation_queue.py && flowmap report
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

import flowmap

SAMPLES, TOKENS, STEPS = 4, 256, 3
OVERHEAD = 30  # bytes a one-element float32 array adds in a pickled list (pickle.dumps, by hand)
EXPECT = {"kind": "serialisation", "seam": "reward -> trainer",
          "bytes_per_step": SAMPLES * TOKENS * OVERHEAD}


def reward(q: mp.Queue) -> None:  # type: ignore[type-arg]
    flowmap.set_owner("reward")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            q.put({"token_rewards": [np.array([r], dtype=np.float32)
                                     for r in rng.standard_normal(TOKENS)]})


def main() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=reward, args=(q,))
    p.start()
    flowmap.set_owner("trainer")
    for step in range(STEPS):
        flowmap.step(step)
        for _ in range(SAMPLES):
            q.get()
    p.join()


if __name__ == "__main__":
    main()
